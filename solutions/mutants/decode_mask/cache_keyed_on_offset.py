"""Known wrong: masks are memoised by the offset S - T alone (the part that decides the diagonal),
so a later call with the same offset but another T gets the earlier mask back: a mask of the
wrong shape. Each call gets a copy, so nothing is shared; only the key is too short."""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # no classic mistake: every-argument and random checks show it
EXPECTED_LEVEL = "weak"

_MASKS = {}


def decode_causal_mask(T, S):
    if isinstance(T, bool) or isinstance(S, bool) or not isinstance(T, (int, np.integer)) \
            or not isinstance(S, (int, np.integer)):
        raise ValueError("T and S must be integers")
    if not 1 <= T <= S:
        raise ValueError(f"need 1 <= T <= S, got T={T}, S={S}")
    offset = int(S - T)
    if offset not in _MASKS:
        _MASKS[offset] = np.arange(S)[None, :] <= np.arange(offset, S)[:, None]
    return _MASKS[offset].copy()
