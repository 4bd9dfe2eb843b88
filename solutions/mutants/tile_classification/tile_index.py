"""Known wrong: tiles classified by comparing tile indices, right only for square prefill with equal tiles."""
import numpy as np

EXPECTED_DIAGNOSIS = "tile_index_diagonal"
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
    return np.where(b > a, SKIP, np.where(b < a, FULL, PARTIAL))
