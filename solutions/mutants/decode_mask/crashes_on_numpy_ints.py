"""Known wrong: a numpy integer size crashes (TypeError), though the contract accepts it."""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"


def decode_causal_mask(T, S):
    if not (isinstance(T, (int, np.integer)) and isinstance(S, (int, np.integer))):
        raise ValueError(f"T and S must be integers, got {type(T).__name__} and {type(S).__name__}")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    offset = {int: lambda n: n}[type(S)](S) - T  # looks up the Python type: np.int64 is not a key
    return np.arange(S)[None, :] <= offset + np.arange(T)[:, None]
