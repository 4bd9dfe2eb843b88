"""paged_kv_cache: a paged KV cache with block tables and copy-on-write forks (see README.md)."""
import numpy as np


class PagedKVCache:
    """A pool of ``num_blocks`` blocks of ``block_size`` token slots, shared by many sequences.

    Attributes (numpy arrays, updated in place):
        key_pool:   float64 [num_blocks, block_size, num_kv_heads, head_dim]
        value_pool: float64 [num_blocks, block_size, num_kv_heads, head_dim]
    Token p of a sequence lives at pool[table[p // block_size], p % block_size], where
    table = block_table(seq_id). Raises ValueError unless every size is >= 1.
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int):
        raise NotImplementedError

    def num_free_blocks(self) -> int:
        """Blocks that no sequence holds."""
        raise NotImplementedError

    def add_sequence(self, seq_id: int) -> None:
        """Start a new, empty sequence. ValueError if seq_id is in use."""
        raise NotImplementedError

    def append(self, seq_id: int, k: np.ndarray, v: np.ndarray) -> None:
        """Store T new tokens, k and v [T, num_kv_heads, head_dim], after the sequence's last one.

        Takes free blocks as needed, copying first a block that another sequence also holds
        (no append changes what another sequence sees). With too few free blocks: RuntimeError,
        nothing changed. ValueError for an unknown seq_id or wrong shapes.
        """
        raise NotImplementedError

    def seq_len(self, seq_id: int) -> int:
        """Tokens the sequence holds. ValueError for an unknown seq_id."""
        raise NotImplementedError

    def block_table(self, seq_id: int) -> np.ndarray:
        """A copy of the sequence's blocks in order: int64 [ceil(seq_len / block_size)]."""
        raise NotImplementedError

    def fork(self, parent_id: int, child_id: int) -> None:
        """A new sequence child_id holding the parent's tokens, sharing its blocks: nothing is copied."""
        raise NotImplementedError

    def free(self, seq_id: int) -> None:
        """End the sequence; each of its blocks returns to the pool when no other sequence holds it."""
        raise NotImplementedError


def paged_attention(cache: PagedKVCache, seq_id: int, q: np.ndarray) -> np.ndarray:
    """Attention outputs, float64 [T, Hq, D], of the queries q [T, Hq, D] of the sequence's last T tokens.

    Equal to dense causal attention over the sequence's own tokens (scale 1/sqrt(D)). Query
    head h reads kv head h // (Hq // Hkv). Uses only cache.seq_len, cache.block_table,
    cache.key_pool and cache.value_pool. ValueError for an unknown seq_id, a q not
    [T, Hq, head_dim], Hq not a multiple of num_kv_heads, or T outside 1 .. seq_len.
    """
    raise NotImplementedError
