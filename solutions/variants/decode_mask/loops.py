"""Correct, written as loops over rows; accepts numpy integer sizes."""
import operator

import numpy as np


def decode_causal_mask(T, S):
    T, S = operator.index(T), operator.index(S)  # Python ints, whatever integer type came in
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    mask = np.zeros((T, S), dtype=bool)
    for row in range(T):
        mask[row, : S - T + row + 1] = True
    return mask
