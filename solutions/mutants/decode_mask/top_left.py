"""Known wrong: the square-prefill mask sliced to T rows, so row i sees keys 0..i."""
import numpy as np

EXPECTED_DIAGNOSIS = "top_left_alignment"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.tril(np.ones((T, S), dtype=bool))
