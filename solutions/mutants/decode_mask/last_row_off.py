"""Known wrong, unlike any classic mistake: the last query row misses its own key when T > 1.
No diagnosis may be named: the message says what was seen."""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    mask = np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
    if T > 1:
        mask[-1, -1] = False
    return mask
