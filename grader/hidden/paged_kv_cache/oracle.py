"""Slow, obviously right specs for paged_kv_cache, written from what each sequence holds.

The oracle knows nothing of blocks in a pool: every sequence is its own token history, plain
arrays of keys and values by position. Attention is dense, one query head and one query at a
time, over the history. The only block arithmetic here is the count a copy-on-write cache
needs at least, from which sequences share which logical block.
"""
import math

import numpy as np


def attention(keys, values, q):
    """q [T, Hq, D] are the last T tokens of a history keys, values [L, Hkv, D]; query head h
    reads kv head h // (Hq // Hkv) and sees every position up to its own. Returns [T, Hq, D]."""
    T, Hq, D = q.shape
    L, Hkv, _ = keys.shape
    group = Hq // Hkv
    out = np.empty((T, Hq, D))
    for i in range(T):
        position = L - T + i  # query i is the token at this position
        for h in range(Hq):
            kv_head = h // group
            scores = keys[:position + 1, kv_head] @ q[i, h] / math.sqrt(D)
            weights = np.exp(scores - scores.max())
            out[i, h] = weights / weights.sum() @ values[:position + 1, kv_head]
    return out


class Histories:
    """Every live sequence's keys and values by position, and the blocks it shares.

    ``shared[s]`` lists, per logical block of sequence s, a token naming that block: fork
    hands the child the parent's tokens, an append into a partly filled block that others
    hold makes a new one. The number of distinct tokens is the fewest blocks any correct
    copy-on-write cache can hold."""

    def __init__(self, block_size, num_kv_heads, head_dim):
        self.block_size, self.shape = block_size, (num_kv_heads, head_dim)
        self.keys, self.values, self.shared = {}, {}, {}
        self._next_block = 0

    def live(self):
        return sorted(self.keys)

    def length(self, seq_id):
        return len(self.keys[seq_id])

    def add(self, seq_id):
        self.keys[seq_id] = np.empty((0, *self.shape))
        self.values[seq_id] = np.empty((0, *self.shape))
        self.shared[seq_id] = []

    def blocks_needed(self, seq_id, T):
        """Blocks an append of T tokens takes from the pool, counting the copy of a shared tail."""
        if T == 0:
            return 0
        L, blocks = self.length(seq_id), self.shared[seq_id]
        copy_tail = L % self.block_size != 0 and self._holders(blocks[-1]) > 1
        return math.ceil((L + T) / self.block_size) - len(blocks) + copy_tail

    def append(self, seq_id, k, v):
        if len(k) == 0:
            return
        blocks = self.shared[seq_id]
        if self.length(seq_id) % self.block_size and self._holders(blocks[-1]) > 1:
            blocks[-1] = self._new_block()
        self.keys[seq_id] = np.concatenate([self.keys[seq_id], k])
        self.values[seq_id] = np.concatenate([self.values[seq_id], v])
        while len(blocks) < math.ceil(self.length(seq_id) / self.block_size):
            blocks.append(self._new_block())

    def fork(self, parent, child):
        self.keys[child], self.values[child] = self.keys[parent].copy(), self.values[parent].copy()
        self.shared[child] = list(self.shared[parent])

    def free(self, seq_id):
        for table in (self.keys, self.values, self.shared):
            del table[seq_id]

    def fewest_blocks(self):
        return len({b for blocks in self.shared.values() for b in blocks})

    def _holders(self, block):
        return sum(block in blocks for blocks in self.shared.values())

    def _new_block(self):
        self._next_block += 1
        return self._next_block
