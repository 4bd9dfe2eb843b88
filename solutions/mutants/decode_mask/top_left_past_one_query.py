"""Known wrong: one query (a plain decode step) is special-cased to see every key, and a chunk of T > 1
queries gets the square-prefill mask sliced to T rows, so row i sees keys 0..i. It passes every public
test (T = 1, T = S, shapes, T > S refused): only a chunk with 1 < T < S shows it. The own-test checks
run candidates' tests against it (rubrics/decode_mask.toml): the public tests themselves earn nothing."""
import numpy as np

EXPECTED_DIAGNOSIS = "top_left_alignment"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    if T == 1:
        return np.ones((1, S), dtype=bool)
    return np.tril(np.ones((T, S), dtype=bool))
