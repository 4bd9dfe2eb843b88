"""Known wrong: the last position is computed from S, then T is taken from it: with T a narrow numpy
integer (np.int8) and S a large Python int, NumPy 2 refuses the mixed arithmetic (OverflowError), though
the contract accepts any signed dtype that holds each value."""

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"

import numpy as np


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S]; row i is the query at position S - T + i. True = may attend."""
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    last = S - 1
    q_pos = np.arange(last - T + 1, S)[:, None]  # absolute positions of the new tokens   [T, 1]
    k_pos = np.arange(S)[None, :]  # absolute positions of the cached keys          [1, S]
    return k_pos <= q_pos  # bottom-right aligned                                   [T, S]
