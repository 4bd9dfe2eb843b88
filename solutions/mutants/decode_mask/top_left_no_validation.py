"""Known wrong twice: a top-left mask, and invalid sizes accepted silently."""
import numpy as np

EXPECTED_DIAGNOSIS = ("top_left_alignment", "accepts_invalid_sizes")


def decode_causal_mask(T, S):
    return np.tril(np.ones((max(T, 0), max(S, 0)), dtype=bool))
