"""A correct {id} written differently: a loop."""
import numpy as np


def new_positions(T: int, S: int) -> np.ndarray:
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T = {T}, S = {S}")
    return np.array([S - T + i for i in range(T)], dtype=np.int64)
