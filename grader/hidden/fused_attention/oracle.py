"""Slow, obviously right specs for fused_attention, written from the rule on absolute positions.

A query at position p may see a key stored at position k when k >= 0 (the slot holds a key),
k <= p, and with a window W also k > p - W. Everything here loops over query rows and never
tiles anything, so it is independent of how a kernel organises its work.
"""
import numpy as np


def visible_keys(p: int, k_positions: np.ndarray, window=None) -> np.ndarray:
    """Bool [S]: which stored keys the query at position ``p`` may see."""
    seen = (k_positions >= 0) & (k_positions <= p)
    if window is not None:
        seen &= k_positions > p - window
    return seen


def attention(q, k, v, q_positions, k_positions, window=None):
    """(o [T, D], lse [T]) in float64; a row that sees nothing gives o = 0, lse = -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    T, D = q.shape
    o, lse = np.zeros((T, v.shape[1])), np.full(T, -np.inf)
    for i in range(T):
        seen = np.flatnonzero(visible_keys(int(q_positions[i]), k_positions, window))
        if seen.size:
            s = k[seen] @ q[i] / np.sqrt(D)
            top = s.max()
            w = np.exp(s - top)
            lse[i] = top + np.log(w.sum())
            o[i] = (w / w.sum()) @ v[seen]
    return o, lse


def tile_count(n: int, block: int) -> int:
    return -(-n // block)


def visible_tiles(q_positions, k_positions, window, block_q: int, block_k: int) -> np.ndarray:
    """Bool [query tiles, key tiles]: True when some query of the query tile may see some key
    of the key tile (so the kernel must load that key tile for that query tile)."""
    T, S = len(q_positions), len(k_positions)
    tiles = np.zeros((tile_count(T, block_q), tile_count(S, block_k)), dtype=bool)
    for i in range(T):
        seen = visible_keys(int(q_positions[i]), k_positions, window)
        for b in np.unique(np.flatnonzero(seen) // block_k):
            tiles[i // block_q, b] = True
    return tiles


def ring_positions(capacity: int, written: int) -> np.ndarray:
    """Positions stored in each slot of a ring buffer after ``written`` tokens, -1 = empty.

    Token t goes to slot t % capacity, so each slot keeps the last token written there."""
    positions = np.full(capacity, -1, dtype=np.int64)
    for t in range(written):
        positions[t % capacity] = t
    return positions
