"""Correct, written differently: loops over rows, a running pairwise merge in part order (each
new part folded into the accumulator, both rescaled to the new log-sum-exp), ranges built by a
loop, and the cascade's suffix attended sequence by sequence."""
import math

import numpy as np


def _check_floats(*arrays):
    for a in arrays:
        if not np.issubdtype(np.asarray(a).dtype, np.floating):
            raise ValueError(f"expected a float array, got {np.asarray(a).dtype}")


def attention_with_lse(q, k, v, mask):
    q, k, v, mask = np.asarray(q), np.asarray(k), np.asarray(v), np.asarray(mask)
    _check_floats(q, k, v)
    if q.ndim != 2 or k.ndim != 2 or v.shape != k.shape or k.shape[1] != q.shape[1] \
            or mask.shape != (q.shape[0], k.shape[0]):
        raise ValueError(f"shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}, mask {mask.shape}")
    T, D = q.shape
    o, lse = np.zeros((T, D)), np.full(T, -np.inf)
    for t in range(T):
        keys = np.flatnonzero(mask[t])
        if keys.size == 0:
            continue
        s = k[keys] @ q[t] / math.sqrt(D)
        w = np.exp(s - s.max())
        o[t] = w @ v[keys] / w.sum()
        lse[t] = s.max() + math.log(w.sum())
    return o, lse


def _fold(acc, acc_lse, o_i, lse_i):
    """Merge one part into the running (acc, acc_lse) of one row."""
    if lse_i == -math.inf:
        return acc, acc_lse
    if acc_lse == -math.inf:
        return o_i.copy(), lse_i
    new = max(acc_lse, lse_i) + math.log1p(math.exp(-abs(acc_lse - lse_i)))
    return acc * math.exp(acc_lse - new) + o_i * math.exp(lse_i - new), new


def merge_states(o, lse):
    o, lse = np.asarray(o), np.asarray(lse)
    _check_floats(o, lse)
    if o.ndim != 3 or lse.shape != o.shape[:2] or o.shape[0] == 0:
        raise ValueError(f"need o [N, T, D] and lse [N, T] with N >= 1, got {o.shape} and {lse.shape}")
    N, T, D = o.shape
    out, out_lse = np.zeros((T, D)), np.full(T, -np.inf)
    for t in range(T):
        acc, acc_lse = np.zeros(D), -math.inf
        for i in range(N):
            acc, acc_lse = _fold(acc, acc_lse, o[i, t], float(lse[i, t]))
        out[t], out_lse[t] = acc, acc_lse
    return out, out_lse


def split_ranges(S, num_splits):
    if int(S) != S or int(num_splits) != num_splits or S < 0 or num_splits < 1:
        raise ValueError(f"need S >= 0 and num_splits >= 1, got {S}, {num_splits}")
    S, num_splits = int(S), int(num_splits)
    ranges, start = [], 0
    for i in range(num_splits):
        size = S // num_splits + (1 if i < S % num_splits else 0)
        ranges.append((start, start + size))
        start += size
    return ranges


def split_kv_attention(q, k, v, q_positions, k_positions, num_splits):
    q_pos, k_pos = np.asarray(q_positions, dtype=np.int64), np.asarray(k_positions, dtype=np.int64)
    if q_pos.shape != (len(q),) or k_pos.shape != (len(k),):
        raise ValueError("one position per query and per key")
    if (q_pos < 0).any():
        raise ValueError("query positions must be >= 0")
    parts = [attention_with_lse(q, k[a:b], v[a:b], (k_pos[a:b] >= 0) & (k_pos[a:b] <= q_pos[:, None]))
             for a, b in split_ranges(len(k), num_splits)]
    return merge_states(np.array([p[0] for p in parts]), np.array([p[1] for p in parts]))


def shared_prefix_attention(q, prefix_k, prefix_v, suffix_k, suffix_v):
    q, suffix_k, suffix_v = np.asarray(q), np.asarray(suffix_k), np.asarray(suffix_v)
    B, T, D = q.shape
    L = suffix_k.shape[1]
    if not 1 <= T <= L or suffix_k.shape != (B, L, D) or suffix_v.shape != (B, L, D):
        raise ValueError(f"bad shapes: q {q.shape}, suffix {suffix_k.shape}, {suffix_v.shape}")
    shared = attention_with_lse(q.reshape(B * T, D), prefix_k, prefix_v, np.ones((B * T, len(prefix_k)), bool))
    out = np.zeros((B, T, D))
    for b in range(B):
        own = attention_with_lse(q[b], suffix_k[b], suffix_v[b], np.tril(np.ones((T, L), bool), L - T))
        rows = slice(b * T, (b + 1) * T)
        out[b] = merge_states(np.stack([shared[0][rows], own[0]]), np.stack([shared[1][rows], own[1]]))[0]
    return out
