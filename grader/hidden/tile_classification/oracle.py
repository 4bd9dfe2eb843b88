"""Slow, obviously right spec for tile_classification, from the element mask on absolute positions.

Query row i sits at position S - T + i, key j at position j. A query at position p may attend
to key k when k <= p and, with a window W, also k > p - W. A tile is SKIP (0) when none of
its pairs may attend, FULL (2) when all may, PARTIAL (1) otherwise.
"""
import numpy as np

SKIP, PARTIAL, FULL = 0, 1, 2


def tile_count(n: int, block: int) -> int:
    return -(-n // block)


def tile_span(n: int, block: int, index: int) -> range:
    """Indices covered by tile ``index`` of ``n`` items cut into blocks (the last may be shorter)."""
    return range(index * block, min((index + 1) * block, n))


def element_mask(T: int, S: int, rows: range, keys: range, window=None) -> np.ndarray:
    """mask[r, c]: may query row rows[r] attend to key keys[c]?  [len(rows), len(keys)]"""
    p = S - T + np.asarray(rows)[:, None]  # query positions
    k = np.asarray(keys)[None, :]  # key positions
    allowed = k <= p
    if window is not None:
        allowed &= k > p - window
    return allowed


def label(mask: np.ndarray) -> int:
    """The class of a tile from its element mask."""
    return FULL if mask.all() else SKIP if not mask.any() else PARTIAL


def classify_tile(T, S, block_q, block_k, a, b, window=None) -> int:
    rows, keys = tile_span(T, block_q, a), tile_span(S, block_k, b)
    return label(element_mask(T, S, rows, keys, window))


def classify_tile_by_bounds(T, S, block_q, block_k, a, b, window=None) -> int:
    """``classify_tile`` from the tile's extreme positions, in Python ints: for sizes far too large
    for an element mask (2^62 keys, a window past 2^63). The nearest pair decides SKIP (the newest
    query and the oldest key in reach), the farthest pairs FULL; tests hold it to ``classify_tile``."""
    q_first = S - T + a * block_q
    q_last = S - T + min((a + 1) * block_q, T) - 1
    k_first, k_last = b * block_k, min((b + 1) * block_k, S) - 1
    if k_first > q_last or (window is not None and k_last <= q_first - window):
        return SKIP  # every key after every query, or before every query's window
    if k_last <= q_first and (window is None or k_first > q_last - window):
        return FULL  # every key at or before the first query and inside the last query's window
    return PARTIAL


def classify_tiles(T, S, block_q, block_k, window=None) -> np.ndarray:
    """Every tile from the whole T x S element mask: for small shapes only."""
    mask = element_mask(T, S, range(T), range(S), window)
    grid = np.empty((tile_count(T, block_q), tile_count(S, block_k)), dtype=int)
    for a in range(grid.shape[0]):
        for b in range(grid.shape[1]):
            rows, keys = tile_span(T, block_q, a), tile_span(S, block_k, b)
            grid[a, b] = label(mask[rows.start:rows.stop, keys.start:keys.stop])
    return grid
