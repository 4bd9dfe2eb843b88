"""Known wrong: a top-left mask returned as 0/1 int8. The dtype slip must not hide the wrong
values: the checks judge the values through the container, so the mistake is still named."""
import numpy as np

EXPECTED_DIAGNOSIS = "top_left_alignment"


def decode_causal_mask(T, S):
    if isinstance(T, bool) or isinstance(S, bool) or not isinstance(T, (int, np.integer)) \
            or not isinstance(S, (int, np.integer)):
        raise ValueError("T and S must be integers")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.tril(np.ones((T, S), dtype=np.int8))
