"""Known wrong: a correct mask for valid sizes, but T > S silently returns a bogus mask."""
import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_sizes"


def decode_causal_mask(T, S):
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
