"""decode_mask: the causal mask for a decode step with a KV cache (see README.md)."""
import numpy as np


def decode_causal_mask(T: int, S: int) -> np.ndarray:
    """Boolean mask [T, S] for T new queries over S cached keys; True = may attend.

    The T queries are the last T of S positions: row i is the token at position S - T + i,
    and column j is the key at position j. Raises ValueError unless 1 <= T <= S.
    """
    raise NotImplementedError
