"""Correct, one tile at a time with plain ints: no numpy broadcasting at all."""
import numpy as np

SKIP, PARTIAL, FULL = 0, 1, 2


def classify_tiles(T, S, block_q, block_k, window=None):
    for name, n in (("T", T), ("S", S), ("block_q", block_q), ("block_k", block_k)):
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {n!r}")
    if T > S or (window is not None and (not isinstance(window, (int, np.integer)) or window < 1)):
        raise ValueError(f"need T <= S and window None or >= 1, got T={T}, S={S}, window={window}")
    T, S, block_q, block_k = int(T), int(S), int(block_q), int(block_k)
    window = None if window is None else min(int(window), S)
    rows, cols = -(-T // block_q), -(-S // block_k)
    grid = np.zeros((rows, cols), dtype=np.int64)
    for a in range(rows):
        q_first = S - T + a * block_q
        q_last = S - T + min((a + 1) * block_q, T) - 1
        for b in range(cols):
            k_first, k_last = b * block_k, min((b + 1) * block_k, S) - 1
            some = k_first <= q_last and (window is None or k_last > q_first - window)
            every = k_last <= q_first and (window is None or k_first > q_last - window)
            grid[a, b] = FULL if every else PARTIAL if some else SKIP
    return grid
