"""Known wrong, in hygiene only: numpy integer sizes are rejected with a clear ValueError."""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "hire"


def decode_causal_mask(T, S):
    if type(T) is not int or type(S) is not int:
        raise ValueError(f"T and S must be Python ints, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
