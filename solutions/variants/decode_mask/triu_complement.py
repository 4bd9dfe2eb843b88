"""Correct, as the complement of an upper triangle shifted by the offset S - T."""
import operator

import numpy as np


def decode_causal_mask(T, S):
    T, S = operator.index(T), operator.index(S)  # any integer type, never a float
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return ~np.triu(np.ones((T, S), dtype=bool), k=S - T + 1)
