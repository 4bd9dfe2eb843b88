"""Known wrong: partial_attention computes exp(s - m) for every key, masked ones included, and
multiplies by the mask afterwards. Right whenever masked keys hold ordinary values; a key no query
may see that holds a large value (a stale or padding slot, which the contract allows to hold
anything finite) gives exp(huge) = inf, and inf * 0 = NaN.
"""
EXPECTED_DIAGNOSIS = ()  # NaN rows that saw keys: no named mistake is this one
EXPECTED_LEVEL = "weak"

import math

import numpy as np


def _safe_max(m: np.ndarray) -> np.ndarray:
    """The max to subtract: m itself, or 0 where m is -inf (an empty row), so that
    exp(s - m) is exp(-inf) = 0 there instead of exp(nan)."""
    return np.where(m == -np.inf, np.zeros_like(m), m)


def _floating(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{name} must be a floating array, got dtype {x.dtype}")
    return x


def _boolean(name: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.bool_:
        raise ValueError(f"{name} must be a boolean array, got dtype {x.dtype}")
    return x


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of `scores` [..., S], keeping only entries where `mask`
    [..., S] is True. Masked entries get 0 whatever they hold; a row with nothing allowed
    is all zeros. Output has the shape and dtype of `scores`."""
    scores = _floating("scores", scores)
    mask = _boolean("mask", mask)
    if scores.ndim < 1 or mask.shape != scores.shape:
        raise ValueError(f"scores and mask need the same shape [..., S], got {scores.shape} and {mask.shape}")
    s = np.where(mask, scores, np.array(-np.inf, scores.dtype))  # [..., S]
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)  # -inf on empty rows     [..., 1]
    p = np.exp(s - _safe_max(m))  # masked entries: exp(-inf) = 0                     [..., S]
    l = p.sum(axis=-1, keepdims=True)  # [..., 1]
    return p / np.where(l > 0, l, np.ones_like(l))


def partial_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None):
    """Online-softmax state of queries q [T, D] over one chunk of keys k [n, D] and values
    v [n, D], with scores q k^T / sqrt(D) and mask [T, n]
    (True = may attend). n may be 0. Returns (m [T], l [T], o [T, D]).

    Extension beyond the contract, for a tiled kernel: mask=None means every key is allowed
    (the fast path for a tile every query may see; no mask is built)."""
    q, k, v = _floating("q", q), _floating("k", k), _floating("v", v)
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
        raise ValueError(f"q, k, v must be 2-D, got shapes {q.shape}, {k.shape}, {v.shape}")
    (T, D), n = q.shape, k.shape[0]
    if D == 0 or k.shape[1] != D or v.shape != (n, D):
        raise ValueError(f"need q [T, D], k [n, D], v [n, D] with D >= 1, got {q.shape}, {k.shape}, {v.shape}")
    s = (q @ k.T) * (1.0 / math.sqrt(D))  # scaled scores                               [T, n]
    if mask is not None:
        mask = _boolean("mask", mask)
        if mask.shape != (T, n):
            raise ValueError(f"mask must have shape [T, n] = {(T, n)}, got {mask.shape}")
        m = np.max(np.where(mask, s, -np.inf), axis=-1, initial=-np.inf)
        with np.errstate(all="ignore"):
            p = np.exp(s - _safe_max(m)[:, None]) * mask  # the mistake: masked keys weighed, then zeroed
    else:
        m = np.max(s, axis=-1, initial=-np.inf)
        p = np.exp(s - _safe_max(m)[:, None])
    out = np.result_type(s, v)
    return m.astype(out), p.sum(axis=-1).astype(out), (p @ v).astype(out)


def _state(name: str, state):
    if not isinstance(state, (tuple, list)) or len(state) != 3:
        raise ValueError(f"{name} must be a tuple (m, l, o)")
    m, l, o = (_floating(f"{name}[{i}]", x) for i, x in enumerate(state))
    if m.ndim != 1 or l.shape != m.shape or o.ndim != 2 or o.shape[0] != m.shape[0]:
        raise ValueError(f"{name} needs m [T], l [T], o [T, D], got {m.shape}, {l.shape}, {o.shape}")
    return m, l, o


def merge_partials(a, b):
    """Combine the states of two disjoint chunks of keys into the state of their union.
    Each side is rescaled to the common max; an empty side (m = -inf) contributes nothing."""
    ma, la, oa = _state("a", a)
    mb, lb, ob = _state("b", b)
    if ma.shape != mb.shape or oa.shape != ob.shape:
        raise ValueError(f"states differ in shape: o {oa.shape} vs {ob.shape}")
    m = np.maximum(ma, mb)  # [T]
    ca, cb = np.exp(ma - _safe_max(m)), np.exp(mb - _safe_max(m))  # rescale factors  [T]
    return m, ca * la + cb * lb, ca[:, None] * oa + cb[:, None] * ob


def finalize(state) -> np.ndarray:
    """Attention output o / l [T, D]; rows that saw no allowed key are zeros."""
    m, l, o = _state("state", state)
    seen = (l > 0)[:, None]  # [T, 1]
    return np.divide(o, np.where(seen, l[:, None], np.ones_like(l[:, None])), out=np.zeros_like(o), where=seen)
