"""Known wrong: the offset computed as S - T + 1, so each row also sees the next token."""
import numpy as np

EXPECTED_DIAGNOSIS = "offset_off_by_one"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None] + 1
