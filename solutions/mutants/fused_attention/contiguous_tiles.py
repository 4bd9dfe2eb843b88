"""Known wrong: tiles are chosen with classify_tiles, which assumes key j sits at position j and the
queries are the last T of S; the mask itself uses the stored positions. Right on a contiguous
cache, wrong on a wrapped ring buffer."""
import math

import numpy as np
from tile_classification import SKIP, classify_tiles

EXPECTED_DIAGNOSIS = "contiguous_tiles_assumed"


def _validate(q, q_positions, window, block_q, block_k):
    if not isinstance(q, np.ndarray) or q.ndim != 2 or not np.issubdtype(q.dtype, np.floating):
        raise ValueError("q must be a float array [T, D]")
    if np.shape(q_positions) != (q.shape[0],):
        raise ValueError("q_positions needs one entry per query row")
    for name, value in (("block_q", block_q), ("block_k", block_k), ("window", window)):
        if value is None and name == "window":
            continue
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1")


def _visible(q_pos, k_pos, window):
    seen = (k_pos >= 0) & (k_pos <= q_pos)
    return seen if window is None else seen & (k_pos > q_pos - window)


def flash_attention(q, kv, q_positions, *, window=None, block_q=64, block_k=128):
    _validate(q, q_positions, window, block_q, block_k)
    q_pos, k_pos = np.asarray(q_positions), np.asarray(kv.positions)
    (T, D), S = q.shape, len(kv)
    o, lse = np.zeros((T, D)), np.full(T, -np.inf)
    if T == 0:  # classify_tiles asks T >= 1; no queries is a valid call here
        return o, lse
    classes = classify_tiles(T, S, block_q, block_k, window)  # assumes keys 0..S-1, queries last T
    for r0 in range(0, T, block_q):
        rows = slice(r0, min(r0 + block_q, T))
        m_i, l_i, acc = np.full(rows.stop - r0, -np.inf), np.zeros(rows.stop - r0), np.zeros((rows.stop - r0, D))
        for c0 in range(0, S, block_k):
            c1 = min(c0 + block_k, S)
            if classes[r0 // block_q, c0 // block_k] == SKIP:
                continue
            k, v = kv.load(c0, c1)
            mask = _visible(q_pos[rows, None], k_pos[None, c0:c1], window)
            s = np.where(mask, q[rows] @ k.T / math.sqrt(D), -np.inf)
            m_new = np.maximum(m_i, s.max(axis=1))
            safe = np.where(np.isneginf(m_new), 0.0, m_new)
            p, c = np.exp(s - safe[:, None]), np.exp(m_i - safe)
            l_i, acc, m_i = c * l_i + p.sum(axis=1), c[:, None] * acc + p @ v, m_new
        seen = l_i > 0
        o[rows] = np.where(seen[:, None], acc / np.where(seen, l_i, 1.0)[:, None], 0.0)
        lse[rows] = np.where(seen, m_i + np.log(np.where(seen, l_i, 1.0)), -np.inf)
    return o, lse
