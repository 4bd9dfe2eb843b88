"""Correct, written differently: everything in the log domain (np.logaddexp), states combined by
adding log-masses, every result read-only. At scores far beyond 1e4 a state's m + log(l) rounds
to a whole number, as section 1's rule allows (its m is the score's own magnitude). It comes from
a blind set written from the contract alone; the kit judged it weak until its tolerance followed
section 1."""
import numpy as np


def _out_dtype(*arrays):
    return np.dtype(np.float32) if np.result_type(*[a.dtype for a in arrays]) == np.float32 \
        else np.dtype(np.float64)


def _frozen(*arrays):
    for a in arrays:
        a.flags.writeable = False
    return arrays if len(arrays) > 1 else arrays[0]


def _bool_mask(mask, shape):
    mask = np.asarray(mask)
    if mask.shape != tuple(shape):
        raise ValueError(f"mask shape {mask.shape} does not match {tuple(shape)} (no broadcasting)")
    return mask.astype(bool, copy=False)


def _lse(x, axis):
    """log(sum(exp(x))) along axis, -inf for an empty or all -inf slice, without warnings."""
    with np.errstate(under="ignore", over="ignore"):
        return np.logaddexp.reduce(x, axis=axis)


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of scores [..., S], using only the entries where the bool
    mask [..., S] is True. Masked entries get 0; a row with nothing allowed is all zeros.
    Returns an array of the shape and dtype of scores. Mismatched shapes raise ValueError.
    """
    scores = np.asarray(scores)
    if scores.ndim == 0:
        raise ValueError("scores needs a last axis [..., S]")
    mask = _bool_mask(mask, scores.shape)
    dt = _out_dtype(scores)
    s = np.where(mask, scores.astype(np.float64), -np.inf)
    # Shift by the row max first so that logaddexp sees numbers near 0 (exact differences).
    top = s.max(axis=-1, keepdims=True, initial=-np.inf)
    top = np.where(np.isfinite(top), top, 0.0)
    shifted = s - top
    lse = _lse(shifted, -1)[..., None]
    ok = np.isfinite(lse)
    with np.errstate(under="ignore"):
        probs = np.where(ok, np.exp(shifted - np.where(ok, lse, 0.0)), 0.0)
    return _frozen(probs.astype(dt))


def partial_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray):
    """The state (m [T], l [T], o [T, D]) of queries q [T, D] over one chunk of n keys
    k [n, D] with values v [n, D], where the bool mask [T, n] says which keys each query may
    see. Scores are q k^T / sqrt(D). n may be 0. Mismatched shapes raise ValueError.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2:
        raise ValueError(f"expected q [T, D], k [n, D], v [n, D]; got {q.shape}, {k.shape}, {v.shape}")
    T, D = q.shape
    if D == 0:
        raise ValueError("head dimension must be at least 1")
    if k.shape[1] != D or v.shape != k.shape:
        raise ValueError(f"k {k.shape} and v {v.shape} must both be [n, {D}]")
    mask = _bool_mask(mask, (T, k.shape[0]))
    dt = _out_dtype(q, k, v)
    seen = mask.any(axis=0)
    k64 = np.where(seen[:, None], k.astype(np.float64), 0.0)      # unseen keys may hold 1e30
    v64 = np.where(seen[:, None], v.astype(np.float64), 0.0)
    s = np.where(mask, (q.astype(np.float64) @ k64.T) / np.sqrt(D), -np.inf)
    m = s.max(axis=1, initial=-np.inf).astype(dt).astype(np.float64)
    base = np.where(np.isfinite(m), m, 0.0)[:, None]
    log_w = s - base                                               # log of exp(s - m), -inf masked
    log_l = _lse(log_w, 1)
    with np.errstate(under="ignore"):
        l = np.exp(log_l)                                          # exp(-inf) = 0 for empty rows
        o = np.exp(log_w) @ v64
    return _frozen(m.astype(dt), l.astype(dt), o.astype(dt))


def _state(x, name):
    if not isinstance(x, (tuple, list)) or len(x) != 3:
        raise ValueError(f"{name} must be a state (m, l, o)")
    m, l, o = (np.asarray(a) for a in x)
    if m.ndim != 1 or l.shape != m.shape or o.ndim != 2 or o.shape[0] != m.shape[0]:
        raise ValueError(f"{name}: shapes m {m.shape}, l {l.shape}, o {o.shape} do not form a state")
    return m, l, o


def _log_mass(m, l):
    """m + log(l): the log-sum-exp a state stands for; -inf where it saw nothing."""
    m64, l64 = m.astype(np.float64), l.astype(np.float64)
    some = (l64 > 0) & np.isfinite(m64)
    return np.where(some, np.where(some, m64, 0.0) + np.log(np.where(some, l64, 1.0)), -np.inf), some


def merge_partials(a, b):
    """The state of the union of two disjoint chunks, from their states a and b (each
    (m, l, o)). The empty state (-inf, 0, 0) changes nothing."""
    ma, la, oa = _state(a, "a")
    mb, lb, ob = _state(b, "b")
    if oa.shape != ob.shape:
        raise ValueError(f"states of different shapes: o {oa.shape} vs {ob.shape}")
    dt = _out_dtype(ma, la, oa, mb, lb, ob)
    lse_a, sa = _log_mass(ma, la)
    lse_b, sb = _log_mass(mb, lb)
    lse = np.logaddexp(lse_a, lse_b)
    m = np.maximum(np.where(sa, ma.astype(np.float64), -np.inf), np.where(sb, mb.astype(np.float64), -np.inf))
    base = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(under="ignore"):
        l = np.where(np.isfinite(lse), np.exp(lse - base), 0.0)
        wa = np.where(sa, np.exp(np.where(sa, ma.astype(np.float64), -np.inf) - base), 0.0)
        wb = np.where(sb, np.exp(np.where(sb, mb.astype(np.float64), -np.inf) - base), 0.0)
    o = (np.where(sa[:, None], wa[:, None] * np.where(sa[:, None], oa.astype(np.float64), 0.0), 0.0)
         + np.where(sb[:, None], wb[:, None] * np.where(sb[:, None], ob.astype(np.float64), 0.0), 0.0))
    return _frozen(m.astype(dt), l.astype(dt), o.astype(dt))


def finalize(state) -> np.ndarray:
    """Attention output [T, D] from a state: o / l, and zeros for rows that saw nothing."""
    m, l, o = _state(state, "state")
    dt = _out_dtype(m, l, o)
    _, some = _log_mass(m, l)
    safe_l = np.where(some, l.astype(np.float64), 1.0)
    out = np.where(some[:, None], o.astype(np.float64) / safe_l[:, None], 0.0)
    return _frozen(out.astype(dt))
