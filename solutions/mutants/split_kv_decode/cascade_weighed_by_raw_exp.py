"""Known wrong: shared_prefix_attention weighs its two levels by their raw exp(lse) under a silenced
np.errstate: exact for ordinary scores, but NaN once the suffix's scores lie ~900 above or below the
prefix's (exp overflows to inf, or both weights underflow to 0), and no warning to hear. Section 1
allows scaled scores anywhere in [-1e4, 1e4]: a wrong value."""
import math
import operator

import numpy as np

EXPECTED_DIAGNOSIS = ()  # nothing classic: the cascade values at far-apart levels catch it
EXPECTED_LEVEL = "weak"


def _floats(name: str, x, ndim: int) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating) or x.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D float array, got {x.dtype} of shape {x.shape}")
    return x.astype(np.float64, copy=False)


def _positions(name: str, x, length: int) -> np.ndarray:
    x = np.asarray(x)
    if x.shape != (length,) or (x.size and not np.issubdtype(x.dtype, np.integer)):
        raise ValueError(f"{name} must be {length} integer positions, got {x.dtype} of shape {x.shape}")
    return x.astype(np.int64)


def _nonzero(x: np.ndarray) -> np.ndarray:
    """x where it is positive, 1 elsewhere: a divisor or log argument that never warns."""
    return np.where(x > 0, x, 1.0)


def attention_with_lse(q, k, v, mask):
    """Normalised attention of q [T, D] over k, v [n, D] where mask [T, n] allows, and the
    natural-log log-sum-exp of the allowed scaled scores. Empty rows: o = 0, lse = -inf."""
    q, k, v = _floats("q", q, 2), _floats("k", k, 2), _floats("v", v, 2)
    mask = np.asarray(mask)
    (T, D), n = q.shape, k.shape[0]
    if D == 0 or k.shape != (n, D) or v.shape != (n, D) or mask.shape != (T, n) or mask.dtype != bool:
        raise ValueError(f"need q [T, D], k [n, D], v [n, D], bool mask [T, n]; got {q.shape}, {k.shape}, "
                         f"{v.shape}, {mask.dtype} {mask.shape}")
    s = np.where(mask, q @ k.T / math.sqrt(D), -np.inf)  # scaled scores           [T, n]
    m = np.max(s, axis=1, initial=-np.inf)  # -inf on rows that see nothing            [T]
    m_safe = np.where(np.isfinite(m), m, 0.0)  # never evaluate -inf - (-inf)          [T]
    p = np.exp(s - m_safe[:, None])  # [T, n]
    l = p.sum(axis=1)  # [T]
    o = p @ v / _nonzero(l)[:, None]  # [T, D]
    return o, np.where(l > 0, m_safe + np.log(_nonzero(l)), -np.inf)


def merge_states(o, lse):
    """Merge N parts over disjoint key sets, o [N, T, D] and lse [N, T], into one (o [T, D], lse [T])."""
    o, lse = _floats("o", o, 3), _floats("lse", lse, 2)
    if o.shape[0] < 1 or lse.shape != o.shape[:2]:
        raise ValueError(f"need o [N, T, D] and lse [N, T] with N >= 1, got {o.shape} and {lse.shape}")
    top = lse.max(axis=0)  # [T]
    top = np.where(np.isfinite(top), top, 0.0)  # all parts empty: any finite shift will do
    w = np.exp(lse - top)  # each part's weight relative to the largest, 0 for an empty part  [N, T]
    total = w.sum(axis=0)  # [T]
    o = np.where((w > 0)[..., None], o, 0.0)  # an empty part's o may hold anything, even NaN  [N, T, D]
    acc = (w[..., None] * o).sum(axis=0)  # [T, D]
    return acc / _nonzero(total)[:, None], np.where(total > 0, top + np.log(_nonzero(total)), -np.inf)


def split_ranges(S, num_splits):
    """num_splits contiguous (start, stop) ranges covering 0 .. S, longer ones first."""
    if isinstance(S, (float, np.floating)) or isinstance(num_splits, (float, np.floating)):
        raise ValueError(f"S and num_splits must be ints, got {S!r} and {num_splits!r}")
    S, num_splits = operator.index(S), operator.index(num_splits)
    if S < 0 or num_splits < 1:
        raise ValueError(f"need S >= 0 and num_splits >= 1, got S = {S}, num_splits = {num_splits}")
    size, longer = divmod(S, num_splits)
    stops = np.cumsum([size + (i < longer) for i in range(num_splits)])
    return [(int(stop - size - (i < longer)), int(stop)) for i, stop in enumerate(stops)]


def split_kv_attention(q, k, v, q_positions, k_positions, num_splits):
    """Attention of q [T, D] over k, v [S, D] by positions, computed per split and merged."""
    q, k = _floats("q", q, 2), _floats("k", k, 2)
    q_pos = _positions("q_positions", q_positions, q.shape[0])  # [T]
    k_pos = _positions("k_positions", k_positions, k.shape[0])  # [S]
    if (q_pos < 0).any():
        raise ValueError(f"query positions must be >= 0, got {int(q_pos.min())}")
    parts = []
    for start, stop in split_ranges(k.shape[0], num_splits):
        kp = k_pos[start:stop]
        visible = (kp >= 0)[None, :] & (kp[None, :] <= q_pos[:, None])  # [T, stop - start]
        parts.append(attention_with_lse(q, k[start:stop], v[start:stop], visible))
    o, lse = zip(*parts)
    return merge_states(np.stack(o), np.stack(lse))


def shared_prefix_attention(q, prefix_k, prefix_v, suffix_k, suffix_v):
    """Cascade attention: q [B, T, D] of B sequences sharing prefix_k, prefix_v [P, D], each with its
    own suffix_k, suffix_v [B, L, D]; a sequence's queries are its last T positions. Returns [B, T, D]."""
    q, suffix_k, suffix_v = (_floats(n, x, 3) for n, x in [("q", q), ("suffix_k", suffix_k), ("suffix_v", suffix_v)])
    (B, T, D), L = q.shape, suffix_k.shape[1]
    if not 1 <= T <= L or suffix_k.shape != (B, L, D) or suffix_v.shape != (B, L, D):
        raise ValueError(f"need q [B, T, D], suffix_k and suffix_v [B, L, D] with 1 <= T <= L; got {q.shape}, "
                         f"{suffix_k.shape}, {suffix_v.shape}")
    flat = q.reshape(B * T, D)
    # One product with the prefix keys for all B * T queries: every query sees the whole prefix.
    o_pre, lse_pre = attention_with_lse(flat, prefix_k, prefix_v, np.ones((B * T, len(prefix_k)), bool))
    q_pos = np.arange(L - T, L)  # the queries' positions within their own suffix  [T]
    causal = np.arange(L)[None, :] <= q_pos[:, None]  # [T, L]
    suffix = [attention_with_lse(q[b], suffix_k[b], suffix_v[b], causal) for b in range(B)]
    o_suf, lse_suf = (np.concatenate(x) for x in zip(*suffix))  # [B * T, D], [B * T]
    # the two levels weighted by their raw exp(lse), warnings silenced: exact while both stay in range
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        w_pre, w_suf = np.exp(lse_pre)[:, None], np.exp(lse_suf)[:, None]
        o = (w_pre * o_pre + w_suf * o_suf) / (w_pre + w_suf)
    return o.reshape(B, T, D)
