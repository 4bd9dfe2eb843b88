"""gpt2_decode: decode steps of a small GPT-2 with a KV cache (see README.md)."""
from typing import Sequence

import numpy as np

from gpt2 import GPT2, GPT2Config, gelu, layer_norm, softmax  # noqa: F401  (the model you run)


class KVCache:
    """Keys and values of every position decoded so far, for every block and head."""

    def __init__(self, config: GPT2Config):
        """An empty cache for a model of this config (at most config.n_ctx positions)."""
        raise NotImplementedError

    def __len__(self) -> int:
        """The number of cached positions: the tokens fed through decode_step so far."""
        raise NotImplementedError


def decode_step(model: GPT2, cache: KVCache, token_ids: Sequence[int]) -> np.ndarray:
    """Run T = len(token_ids) new tokens through the model; return their logits [T, vocab].

    The new tokens continue the sequence in the cache. Only they are embedded and projected;
    their keys and values are appended to the cache, and attention is causal. The logits equal
    the matching rows of model.forward on the whole sequence. A step that would go past
    config.n_ctx raises ValueError, and so do token ids outside [0, vocab_size); a rejected step
    leaves the cache as it was.
    """
    raise NotImplementedError
