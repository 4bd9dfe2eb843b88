"""Known wrong: the window bound written k >= p - W, so W + 1 keys are visible."""
import numpy as np

EXPECTED_DIAGNOSIS = "window_off_by_one"
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
    a = np.arange(-(-T // block_q))[:, None]
    b = np.arange(-(-S // block_k))[None, :]
    q_first, q_last = S - T + a * block_q, S - T + np.minimum((a + 1) * block_q, T) - 1
    k_first, k_last = b * block_k, np.minimum((b + 1) * block_k, S) - 1
    skip, full = k_first > q_last, k_last <= q_first
    if window is not None:
        skip, full = skip | (k_last < q_first - window), full & (k_first >= q_last - window)
    return np.where(skip, SKIP, np.where(full, FULL, PARTIAL))
