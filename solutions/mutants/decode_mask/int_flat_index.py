"""Known wrong: the mask is built over a flat index of T * S cells computed in the sizes' own integer
type, which wraps for narrow numpy integers (np.int8(5) * np.int8(40) is -56).
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # a general rule: its check's verdict shows it
EXPECTED_LEVEL = "hire"


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S]; row i is the query at position S - T + i. True = may attend."""
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    cell = np.arange(T * S)  # flat index of every cell   [T * S]
    row, key = cell // S, cell % S
    return (key <= S - T + row).reshape(T, S)  # bottom-right aligned             [T, S]
