"""Example submission: the square-prefill mask sliced to T rows, so row i sees keys 0..i."""
import numpy as np


def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.tril(np.ones((T, S), dtype=bool))
