"""Known wrong: the mask is sliced from a bottom-right triangle built once at import (nanoGPT's registered
buffer, aligned to the end), so every caller gets a writable view of the same array: a caller who
writes into one mask changes the masks of later calls.
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # a general rule: its check's verdict shows it
EXPECTED_LEVEL = "weak"


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S]; row i is the query at position S - T + i. True = may attend."""
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    if S <= _MAX:
        return _TRIANGLE[_MAX - T:, _MAX - S:]  # the last T rows, the last S columns: a view
    q_pos = np.arange(S - T, S)[:, None]  # absolute positions of the new tokens   [T, 1]
    k_pos = np.arange(S)[None, :]  # absolute positions of the cached keys          [1, S]
    return k_pos <= q_pos  # bottom-right aligned                                   [T, S]


_MAX = 2048
_TRIANGLE = np.tril(np.ones((_MAX, _MAX), dtype=bool))  # [MAX, MAX], built once
