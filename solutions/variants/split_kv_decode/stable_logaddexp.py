"""Correct, written differently: everything in the log domain with np.logaddexp (no explicit
max subtraction), weights exp(lse_i - lse) selected rather than multiplied for empty parts, and
the input dtype kept (float32 in, float32 out)."""
import math

import numpy as np


def _lse(s, axis):
    """Log-sum-exp along ``axis``; -inf where everything is -inf, and quiet."""
    return np.logaddexp.reduce(s, axis=axis)


def attention_with_lse(q, k, v, mask):
    q, k, v, mask = (np.asarray(x) for x in (q, k, v, mask))
    if mask.dtype != bool or q.ndim != 2 or k.shape != v.shape or k.shape[1:] != q.shape[1:] \
            or mask.shape != (len(q), len(k)):
        raise ValueError(f"shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}, mask {mask.shape}")
    s = np.where(mask, q @ k.T / q.dtype.type(math.sqrt(q.shape[1])), q.dtype.type(-np.inf))  # [T, n]
    lse = _lse(s, axis=1) if s.shape[1] else np.full(len(q), -np.inf, q.dtype)  # [T]
    seen = np.isfinite(lse)
    p = np.exp(s - np.where(seen, lse, 0)[:, None])  # already normalised                 [T, n]
    return (p @ v).astype(q.dtype), lse.astype(q.dtype)


def merge_states(o, lse):
    o, lse = np.asarray(o), np.asarray(lse)
    if o.ndim != 3 or len(o) == 0 or lse.shape != o.shape[:2]:
        raise ValueError(f"need o [N, T, D] and lse [N, T], N >= 1; got {o.shape}, {lse.shape}")
    total = _lse(lse, axis=0)  # [T]
    seen = np.isfinite(lse) & np.isfinite(total)  # [N, T]
    w = np.exp(np.where(seen, lse - np.where(np.isfinite(total), total, 0), -np.inf))  # [N, T]
    return np.einsum("nt,ntd->td", w, np.where(seen[..., None], o, 0)), total


def split_ranges(S, num_splits):
    if int(S) != S or int(num_splits) != num_splits:
        raise ValueError(f"S and num_splits must be integers, got {S!r} and {num_splits!r}")
    S, n = int(S), int(num_splits)
    if S < 0 or n < 1:
        raise ValueError(f"need S >= 0 and num_splits >= 1, got {S}, {n}")
    small, extra = S // n, S % n
    edges = [i * small + min(i, extra) for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:]))


def split_kv_attention(q, k, v, q_positions, k_positions, num_splits):
    q_pos, k_pos = np.asarray(q_positions).astype(np.int64), np.asarray(k_positions).astype(np.int64)
    if q_pos.shape != (len(q),) or k_pos.shape != (len(k),) or (q_pos < 0).any():
        raise ValueError("need one position >= 0 per query and one position per key")
    parts = []
    for a, b in split_ranges(len(k), num_splits):
        mask = (k_pos[None, a:b] >= 0) & (k_pos[None, a:b] <= q_pos[:, None])
        parts.append(attention_with_lse(q, k[a:b], v[a:b], mask))
    return merge_states(np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts]))


def shared_prefix_attention(q, prefix_k, prefix_v, suffix_k, suffix_v):
    q = np.asarray(q)
    B, T, D = q.shape
    L = np.shape(suffix_k)[1]
    if T < 1 or T > L or np.shape(suffix_k) != (B, L, D) or np.shape(suffix_v) != (B, L, D):
        raise ValueError("need q [B, T, D] and suffix [B, L, D] with 1 <= T <= L")
    o_pre, lse_pre = attention_with_lse(q.reshape(-1, D), prefix_k, prefix_v, np.ones((B * T, len(prefix_k)), bool))
    rows = np.arange(L - T, L)[:, None] >= np.arange(L)[None, :]  # [T, L]
    own = [attention_with_lse(q[b], suffix_k[b], suffix_v[b], rows) for b in range(B)]
    o_own, lse_own = np.concatenate([x[0] for x in own]), np.concatenate([x[1] for x in own])
    o, _ = merge_states(np.stack([o_pre, o_own]), np.stack([lse_pre, lse_own]))
    return o.reshape(B, T, D)
