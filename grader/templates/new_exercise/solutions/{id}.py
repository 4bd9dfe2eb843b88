"""Reference for {id}: positions computed once from the counts."""
import numpy as np


def new_positions(T: int, S: int) -> np.ndarray:
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T = {T}, S = {S}")
    return np.arange(S - T, S, dtype=np.int64)  # (T,)
