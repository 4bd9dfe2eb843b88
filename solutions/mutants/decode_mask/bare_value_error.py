"""Known wrong: sizes out of range raise a bare ValueError, with no message. Section 1: invalid
arguments raise ValueError with a message that says what is wrong (a validation slip: hire).
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "hire"


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S]; row i is the query at position S - T + i. True = may attend."""
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    T, S = int(T), int(S)  # Python ints: np.int8(2) with S = 32767 must not overflow in int8
    if not 1 <= T <= S:
        raise ValueError
    q_pos = np.arange(S - T, S)[:, None]  # absolute positions of the new tokens   [T, 1]
    k_pos = np.arange(S)[None, :]  # absolute positions of the cached keys          [1, S]
    return k_pos <= q_pos  # bottom-right aligned                                   [T, S]
