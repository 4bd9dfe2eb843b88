"""Known wrong: strict inequality, so each token cannot see its own key."""
import numpy as np

EXPECTED_DIAGNOSIS = "self_excluded"


def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    return np.arange(S)[None, :] < np.arange(S - T, S)[:, None]
