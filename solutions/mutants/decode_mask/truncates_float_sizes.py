"""Known wrong: sizes go through int() before the range check, so T = 2.5 quietly becomes 2 and a
mask comes back. Every int is right; the prompt and section 1: a size that is not an int is an
invalid argument, which raises ValueError (a validation slip: hire).
"""
import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_sizes"
EXPECTED_LEVEL = "hire"


def decode_causal_mask(T, S):
    T, S = int(T), int(S)
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] <= (S - T) + np.arange(T)[:, None]
