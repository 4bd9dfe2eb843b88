"""A known-wrong {id}: the new tokens numbered from 0, as if the cache were empty."""
import numpy as np

EXPECTED_DIAGNOSIS = "positions_from_zero"


def new_positions(T: int, S: int) -> np.ndarray:
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T = {T}, S = {S}")
    return np.arange(T, dtype=np.int64)
