"""The obviously right answer for {id}, written without looking at solutions/."""
import numpy as np


def new_positions(T: int, S: int) -> np.ndarray:
    return np.array([p for p in range(S) if p >= S - T], dtype=np.int64)
