"""Known wrong: the range is compared before the type is checked, so a string or None for T or S
raises TypeError from the comparison, not ValueError. The prompt: anything but an int raises
ValueError (a validation slip: hire).
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "hire"


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S]; row i is the query at position S - T + i. True = may attend."""
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    T, S = int(T), int(S)  # Python ints: np.int8(2) with S = 32767 must not overflow in int8
    q_pos = np.arange(S - T, S)[:, None]  # absolute positions of the new tokens   [T, 1]
    k_pos = np.arange(S)[None, :]  # absolute positions of the cached keys          [1, S]
    return k_pos <= q_pos  # bottom-right aligned                                   [T, S]
