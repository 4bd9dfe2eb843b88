"""Known wrong: right on valid input, but never validates: T > S, a zero window or True give a grid or another error."""
import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_arguments"
SKIP, PARTIAL, FULL = 0, 1, 2


def classify_tiles(T, S, block_q, block_k, window=None):
    a = np.arange(-(-T // block_q))[:, None]
    b = np.arange(-(-S // block_k))[None, :]
    q_first, q_last = S - T + a * block_q, S - T + np.minimum((a + 1) * block_q, T) - 1
    k_first, k_last = b * block_k, np.minimum((b + 1) * block_k, S) - 1
    skip, full = k_first > q_last, k_last <= q_first
    if window is not None:
        skip, full = skip | (k_last <= q_first - window), full & (k_first > q_last - window)
    return np.where(skip, SKIP, np.where(full, FULL, PARTIAL))
