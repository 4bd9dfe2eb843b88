"""rope_cache: rotary position embeddings (rotate-half) during decode with a KV cache (see README.md).

Shapes: T tokens, H heads, head dimension D (even). Positions are absolute token positions.
"""
from typing import Sequence

import numpy as np


def rope(x: np.ndarray, positions, base: float = 10000.0) -> np.ndarray:
    """x [T, H, D] with row t rotated at positions[t] (rotate-half pairs (i, i + D/2), angle
    theta_i = p * base ** (-2 i / D)); returns [T, H, D]. Positions are >= 0, in any order."""
    raise NotImplementedError


class RopeKVCache:
    """The keys and values of every token decoded so far, keys stored already rotated.

    Attributes: ``keys`` and ``values`` [len, H, D] (may be properties), ``base``.
    """

    def __init__(self, num_heads: int, head_dim: int, base: float = 10000.0):
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


def rope_attention_step(cache: RopeKVCache, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        parents: Sequence[int] | None = None) -> np.ndarray:
    """[T, H, D]: attention outputs of T new tokens, given their unrotated projections q, k, v
    [T, H, D]. Without ``parents`` they are the sequence's next tokens and are appended to the
    cache; with ``parents`` they are draft tokens of a tree and nothing is stored."""
    raise NotImplementedError
