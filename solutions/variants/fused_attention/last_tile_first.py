"""Correct, written differently: key tiles visited from the last to the first, and the mask of
each tile built from its stored positions only when the tile is not fully visible."""
import numpy as np


def _block(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _visible(q_pos, k_pos, window):
    """[rows, keys] bool for one tile pair, from positions."""
    seen = (k_pos[None, :] >= 0) & (k_pos[None, :] <= q_pos[:, None])
    return seen if window is None else seen & (k_pos[None, :] > q_pos[:, None] - window)


def flash_attention(q, kv, q_positions, *, window=None, block_q=64, block_k=128):
    q = np.asarray(q)
    if q.ndim != 2 or q.dtype.kind != "f":
        raise ValueError(f"q must be a float array [T, D], got {q.dtype} of shape {q.shape}")
    q_pos = np.asarray(q_positions)
    if q_pos.shape != (q.shape[0],) or (q_pos.size and q_pos.dtype.kind not in "iu"):
        raise ValueError(f"q_positions must be {q.shape[0]} integers, got shape {q_pos.shape}")
    _block("window", window, allow_none=True)
    _block("block_q", block_q)
    _block("block_k", block_k)
    T, D = q.shape
    S = len(kv)
    k_pos = np.asarray(kv.positions, dtype=np.int64)
    q, q_pos = q.astype(np.float64), q_pos.astype(np.int64)
    if window is not None and T and window > int(q_pos.max()):
        window = None  # wider than every query's past: no limit, and no int64 past 2^63
    o, lse = np.zeros((T, D)), np.full(T, -np.inf)
    for a in range(0, T, int(block_q)):
        rows = slice(a, min(a + int(block_q), T))
        pos = q_pos[rows]
        m = np.full(len(pos), -np.inf)
        l = np.zeros(len(pos))
        acc = np.zeros((len(pos), D))
        for start in reversed(range(0, S, int(block_k))):
            stop = min(start + int(block_k), S)
            seen = _visible(pos, k_pos[start:stop], window)
            if not seen.any():
                continue  # never loaded
            k, v = kv.load(start, stop)
            s = q[rows] @ np.asarray(k, dtype=np.float64).T / np.sqrt(D)
            if not seen.all():
                s = np.where(seen, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=1))
            base = np.where(np.isneginf(m_new), 0.0, m_new)  # rows that saw nothing yet stay at 0
            p = np.exp(s - base[:, None])
            shrink = np.exp(m - base)
            l = l * shrink + p.sum(axis=1)
            acc = acc * shrink[:, None] + p @ np.asarray(v, dtype=np.float64)
            m = m_new
        seen_any = l > 0
        block_o = np.zeros_like(acc)
        block_o[seen_any] = acc[seen_any] / l[seen_any, None]
        o[rows] = block_o
        block_lse = np.full(len(pos), -np.inf)
        block_lse[seen_any] = m[seen_any] + np.log(l[seen_any])
        lse[rows] = block_lse
    return o, lse
