"""Example submission: right for small steps, loops forever once T > 100."""
import numpy as np


def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    while T > 100:
        pass
    return np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
