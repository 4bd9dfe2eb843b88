"""prefix_cache: the block allocator of automatic prefix caching (see README.md)."""
from typing import Sequence

import numpy as np

from prefix_hash import block_hash  # noqa: F401  (given: the hash every block is registered under)


class PrefixCache:
    """``num_blocks`` KV blocks of ``block_size`` tokens, shared across requests by their prefixes.

    Holds block ids only, no keys or values. ValueError unless both sizes are >= 1.
    """

    def __init__(self, num_blocks: int, block_size: int):
        raise NotImplementedError

    def add_request(self, seq_id: int, prompt: Sequence[int]) -> int:
        """Start sequence ``seq_id`` with ``prompt`` (a non-empty list, tuple or 1-D integer array).

        Returns how many of the prompt's tokens are served from the cache. RuntimeError, with
        nothing changed, when there are not enough free blocks for the rest.
        """
        raise NotImplementedError

    def append_token(self, seq_id: int, token: int) -> None:
        """Add one generated token to the sequence (RuntimeError, nothing changed, when it needs a
        block and none is free)."""
        raise NotImplementedError

    def num_tokens(self, seq_id: int) -> int:
        raise NotImplementedError

    def block_table(self, seq_id: int) -> np.ndarray:
        """int64 [ceil(num_tokens / block_size)]: the sequence's blocks, in order."""
        raise NotImplementedError

    def free(self, seq_id: int) -> None:
        """End the sequence; its blocks stay cached until they are needed for something else."""
        raise NotImplementedError

    def num_free_blocks(self) -> int:
        """The length of the free queue."""
        raise NotImplementedError

    def num_cached_blocks(self) -> int:
        """How many blocks are registered under a hash now."""
        raise NotImplementedError
