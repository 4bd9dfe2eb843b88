"""Known wrong: the offset computed as S - T + 1, so each row also sees the next token."""
import numpy as np

EXPECTED_DIAGNOSIS = "offset_off_by_one"


def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None] + 1
