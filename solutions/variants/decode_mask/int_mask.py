"""Correct values in the wrong dtype: the mask as 0/1 int8 instead of bool. A container slip
(CONTRACT section 1): it caps at hire, and every check still judges the values."""
import numpy as np

EXPECTED_LEVEL = "hire"


def decode_causal_mask(T, S):
    if isinstance(T, bool) or isinstance(S, bool) or not isinstance(T, (int, np.integer)) \
            or not isinstance(S, (int, np.integer)):
        raise ValueError("T and S must be integers")
    T, S = int(T), int(S)
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return (np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]).astype(np.int8)
