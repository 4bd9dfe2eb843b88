"""Slow, obviously right specs for fused_attention, written from the rule on absolute positions.

A query at position p may see a key stored at position k when k >= 0 (the slot holds a key),
k <= p, and with a window W also k > p - W. Everything here loops over query rows and never
tiles anything, so it is independent of how a kernel organises its work.
"""
import numpy as np

from .._oracles import attention_lse, ring_positions, visible_keys  # noqa: F401  (shared)


def attention(q, k, v, q_positions, k_positions, window=None):
    """(o [T, D], lse [T]) in float64; a row that sees nothing gives o = 0, lse = -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))  # once, not once per row
    rows = [attention_lse(q[i:i + 1], k, v, visible_keys(int(p), k_positions, window)[None])
            for i, p in enumerate(q_positions)]  # one row at a time: no T x S mask, even here
    if not rows:
        return np.zeros((0, np.shape(v)[1])), np.zeros(0)
    return np.concatenate([o for o, _ in rows]), np.concatenate([lse for _, lse in rows])


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
