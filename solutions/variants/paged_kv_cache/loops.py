"""A correct answer written differently: plain loops, a FIFO free list that hands out the
highest blocks first, per-block reference counts in a dict, attention one query and one head
at a time over the table's blocks, no fused kernel. Must reach hire or better."""
import math
from collections import deque

import numpy as np

EXPECTED_LEVEL = "strong_hire"  # what kvgrade verify should see when it grades this variant


def _count(name, value):
    if not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim):
        self.num_blocks = _count("num_blocks", num_blocks)
        self.block_size = _count("block_size", block_size)
        self.num_kv_heads = _count("num_kv_heads", num_kv_heads)
        self.head_dim = _count("head_dim", head_dim)
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)
        self.key_pool = np.zeros(shape)
        self.value_pool = np.zeros(shape)
        self.free_list = deque(reversed(range(self.num_blocks)))
        self.holders = {}  # block -> number of sequences holding it
        self.tables = {}
        self.lengths = {}

    def num_free_blocks(self):
        return len(self.free_list)

    def _id(self, seq_id, known=True):
        if not isinstance(seq_id, (int, np.integer)):
            raise ValueError(f"sequence ids are ints, got {seq_id!r}")
        seq_id = int(seq_id)
        if known and seq_id not in self.tables:
            raise ValueError(f"no sequence {seq_id}")
        if not known and seq_id in self.tables:
            raise ValueError(f"sequence {seq_id} exists already")
        return seq_id

    def add_sequence(self, seq_id):
        seq_id = self._id(seq_id, known=False)
        self.tables[seq_id] = []
        self.lengths[seq_id] = 0

    def seq_len(self, seq_id):
        return self.lengths[self._id(seq_id)]

    def block_table(self, seq_id):
        return np.array(self.tables[self._id(seq_id)], dtype=np.int64)

    def _grab(self):
        block = self.free_list.popleft()
        self.holders[block] = 1
        return block

    def _drop(self, block):
        self.holders[block] -= 1
        if self.holders[block] == 0:
            del self.holders[block]
            self.free_list.append(block)

    def append(self, seq_id, k, v):
        seq_id = self._id(seq_id)
        want = (self.num_kv_heads, self.head_dim)
        if not (isinstance(k, np.ndarray) and isinstance(v, np.ndarray)) or k.ndim != 3 \
                or k.shape[1:] != want or k.shape != v.shape:
            raise ValueError(f"k and v must be [T, {want[0]}, {want[1]}]")
        table, length = self.tables[seq_id], self.lengths[seq_id]
        if len(k) == 0:
            return
        must_copy = length % self.block_size > 0 and self.holders[table[-1]] > 1
        blocks_after = math.ceil((length + len(k)) / self.block_size)
        if blocks_after - len(table) + must_copy > len(self.free_list):
            raise RuntimeError("not enough free blocks")
        if must_copy:
            mine = self._grab()
            self.key_pool[mine] = self.key_pool[table[-1]]
            self.value_pool[mine] = self.value_pool[table[-1]]
            self._drop(table[-1])
            table[-1] = mine
        while len(table) < blocks_after:
            table.append(self._grab())
        for row in range(len(k)):
            p = length + row
            self.key_pool[table[p // self.block_size], p % self.block_size] = k[row]
            self.value_pool[table[p // self.block_size], p % self.block_size] = v[row]
        self.lengths[seq_id] = length + len(k)

    def fork(self, parent_id, child_id):
        parent = self._id(parent_id)
        child = self._id(child_id, known=False)
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.holders[block] += 1

    def free(self, seq_id):
        seq_id = self._id(seq_id)
        for block in self.tables.pop(seq_id):
            self._drop(block)
        del self.lengths[seq_id]


def paged_attention(cache, seq_id, q):
    n = cache.seq_len(seq_id)
    table = cache.block_table(seq_id)
    _, size, kv_heads, dim = cache.key_pool.shape
    if not isinstance(q, np.ndarray) or q.ndim != 3 or q.shape[2] != dim:
        raise ValueError(f"q must be [T, Hq, {dim}]")
    T, heads = q.shape[:2]
    if heads == 0 or heads % kv_heads or not 1 <= T <= n:
        raise ValueError("need Hq a multiple of the kv heads and 1 <= T <= seq_len")
    out = np.zeros((T, heads, dim))
    for i in range(T):
        me = n - T + i  # this query's position: it sees positions 0 .. me
        for h in range(heads):
            kv = h // (heads // kv_heads)
            keys, values = [], []
            for b, block in enumerate(table):  # whole blocks, the last one cut at position me
                rows = min(size, me + 1 - b * size)
                if rows <= 0:
                    break
                keys.append(cache.key_pool[block, :rows, kv])
                values.append(cache.value_pool[block, :rows, kv])
            scores = np.concatenate(keys) @ q[i, h] / math.sqrt(dim)
            weights = np.exp(scores - scores.max())
            out[i, h] = weights / weights.sum() @ np.concatenate(values)
    return out
