"""Known wrong: positions held in int16, so they wrap past 2^15 and the mask goes wrong there."""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # nothing classic: the long-context check's verdict shows it
EXPECTED_LEVEL = "weak"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    q_pos = np.arange(S - T, S).astype(np.int16)[:, None]
    k_pos = np.arange(S).astype(np.int16)[None, :]
    return k_pos <= q_pos
