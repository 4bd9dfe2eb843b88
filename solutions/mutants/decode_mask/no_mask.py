"""Known wrong: "decode needs no mask" applied to every T, so chunk rows see the future."""
import numpy as np

EXPECTED_DIAGNOSIS = "no_mask"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.ones((T, S), dtype=bool)
