"""Known wrong: right answers, but from the whole T x S element mask, reduced tile by tile."""
import numpy as np

EXPECTED_DIAGNOSIS = "dense_mask_built"
SKIP, PARTIAL, FULL = 0, 1, 2


def _validate(T, S, block_q, block_k, window):
    for name, v in (("T", T), ("S", S), ("block_q", block_q), ("block_k", block_k), ("window", window)):
        if v is None and name == "window":
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    if T > S:
        raise ValueError(f"need T <= S, got T={T}, S={S}")


def classify_tiles(T, S, block_q, block_k, window=None):
    _validate(T, S, block_q, block_k, window)
    p = np.arange(S - T, S)[:, None]
    k = np.arange(S)[None, :]
    mask = k <= p  # [T, S]
    if window is not None:
        mask &= k > p - window
    q_starts, k_starts = np.arange(0, T, block_q), np.arange(0, S, block_k)
    every = np.logical_and.reduceat(np.logical_and.reduceat(mask, k_starts, axis=1), q_starts, axis=0)
    some = np.logical_or.reduceat(np.logical_or.reduceat(mask, k_starts, axis=1), q_starts, axis=0)
    return np.where(every, FULL, np.where(some, PARTIAL, SKIP))
