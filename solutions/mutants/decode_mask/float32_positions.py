"""Known wrong: positions held in float32 (exact only up to 2^24), so past 2^24 keys a query's next
key rounds down onto its own position and the mask shows it that future key."""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # nothing classic: the long-context check's verdict shows it
EXPECTED_LEVEL = "weak"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    T, S = int(T), int(S)
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    q_pos = np.arange(S - T, S, dtype=np.float32)[:, None]
    k_pos = np.arange(S, dtype=np.float32)[None, :]
    return k_pos <= q_pos
