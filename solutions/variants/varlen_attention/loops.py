"""Correct, written with plain loops: one query row at a time, over its own sequence's keys
only, with an online softmax; positions from Python counters."""
import math

import numpy as np


def _cu(values, name):
    try:
        cu = [int(x) for x in values]
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a flat sequence of ints") from None
    if len(cu) < 2 or any(isinstance(x, (float, bool)) for x in values):
        raise ValueError(f"{name} must hold at least two ints")
    return cu


def _sequences(cu_seqlens_q, cu_seqlens_k):
    """(first query row, n_q, first key row, n_k) per sequence, after checking the arrays."""
    if np.ndim(cu_seqlens_q) != 1 or np.ndim(cu_seqlens_k) != 1:
        raise ValueError("cu_seqlens must be 1-D")
    cu_q, cu_k = _cu(cu_seqlens_q, "cu_seqlens_q"), _cu(cu_seqlens_k, "cu_seqlens_k")
    if len(cu_q) != len(cu_k):
        raise ValueError("cu_seqlens_q and cu_seqlens_k differ in length")
    if cu_q[0] != 0 or cu_k[0] != 0:
        raise ValueError("cu_seqlens must start at 0")
    out = []
    for b in range(len(cu_q) - 1):
        n_q, n_k = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        if n_q < 0 or n_k < 0:
            raise ValueError(f"cu_seqlens decrease at sequence {b}")
        if n_q > n_k:
            raise ValueError(f"sequence {b} has more queries ({n_q}) than keys ({n_k})")
        out.append((cu_q[b], n_q, cu_k[b], n_k))
    return out, cu_q[-1], cu_k[-1]


def varlen_mask(cu_seqlens_q, cu_seqlens_k):
    sequences, total_q, total_k = _sequences(cu_seqlens_q, cu_seqlens_k)
    mask = np.zeros((total_q, total_k), dtype=bool)
    for q0, n_q, k0, n_k in sequences:
        for i in range(n_q):
            mine = n_k - n_q + i  # this query's position in its own sequence
            for j in range(mine + 1):
                mask[q0 + i, k0 + j] = True
    return mask


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    sequences, total_q, total_k = _sequences(cu_seqlens_q, cu_seqlens_k)
    q, k, v = np.asarray(q, float), np.asarray(k, float), np.asarray(v, float)
    if q.ndim != 2 or k.ndim != 2 or v.ndim != 2 or q.shape[1] != k.shape[1] or v.shape[1] != k.shape[1]:
        raise ValueError("q, k, v must be 2-D with matching head dims")
    if q.shape[0] != total_q or k.shape[0] != total_k or v.shape[0] != total_k:
        raise ValueError("row counts do not match cu_seqlens")
    scale = 1 / math.sqrt(q.shape[1])
    out = np.zeros((total_q, v.shape[1]))
    for q0, n_q, k0, n_k in sequences:
        for i in range(n_q):
            seen = n_k - n_q + i + 1
            m, l, acc = -math.inf, 0.0, np.zeros(v.shape[1])
            for start in range(0, seen, 64):  # key blocks of this sequence only
                stop = min(start + 64, seen)
                s = k[k0 + start:k0 + stop] @ q[q0 + i] * scale
                m_new = max(m, float(s.max()))
                p = np.exp(s - m_new)
                l = l * math.exp(m - m_new) + float(p.sum())
                acc = acc * math.exp(m - m_new) + p @ v[k0 + start:k0 + stop]
                m = m_new
            out[q0 + i] = acc / l
    return out


def _rows(attention_mask):
    mask = np.asarray(attention_mask)
    if mask.ndim != 2:
        raise ValueError("attention_mask must be 2-D")
    rows = []
    for b, row in enumerate(mask.tolist()):
        if any(x not in (0, 1) for x in row):
            raise ValueError("attention_mask holds values other than 0 and 1")
        pad = 0
        while pad < len(row) and not row[pad]:
            pad += 1
        if not all(row[pad:]):
            raise ValueError(f"row {b} is not left padding followed by real tokens")
        rows.append(pad)
    return rows, mask.shape


def left_padded_positions(attention_mask):
    pads, (B, L) = _rows(attention_mask)
    positions = np.full((B, L), -1, dtype=np.int64)
    for b, pad in enumerate(pads):
        positions[b, pad:] = np.arange(L - pad)
    return positions


def left_padded_decode_mask(attention_mask, T):
    pads, (B, S) = _rows(attention_mask)
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or not 1 <= T <= S:
        raise ValueError(f"T must be in 1..{S}")
    T = int(T)  # a narrow numpy integer would overflow in S - T
    if any(pad > S - T for pad in pads):
        raise ValueError("the last T columns must be real tokens")
    out = np.zeros((B, T, S), dtype=bool)
    for b, pad in enumerate(pads):
        for i in range(T):
            out[b, i, pad:S - T + i + 1] = True
    return out
