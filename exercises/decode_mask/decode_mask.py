"""decode_mask: the causal mask for a decode step with a KV cache (see README.md)."""
import numpy as np


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S] for T new queries over S cached keys; True = may attend.

    The cache holds the whole sequence so far, the T new tokens included; column j is the key
    at position j. Attention over the cache with this mask must equal the new tokens' rows of
    causal attention over the whole sequence. Raises ValueError unless 1 <= T <= S.
    """
    raise NotImplementedError
