"""Known-wrong: append indexes the pool with block ids cast to int16, so past block 32767 tokens are written into another block (red team 27)."""
import operator

import numpy as np

from fused_attention import flash_attention

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = 'weak'


def _size(name, value):
    try:
        n = operator.index(value)  # an int or a numpy integer; 2.5 is not truncated
    except TypeError:
        raise ValueError(f"{name} must be an int, got {value!r}") from None
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")
    return n


class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim):
        shape = tuple(_size(name, n) for name, n in (("num_blocks", num_blocks), ("block_size", block_size),
                                                     ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)))
        self.block_size = shape[1]
        self.key_pool = np.zeros(shape)  # [num_blocks, block_size, Hkv, D]
        self.value_pool = np.zeros(shape)
        self._free = list(range(shape[0]))[::-1]  # pop() hands out the lowest block first
        self._refs = np.zeros(shape[0], dtype=np.int64)  # sequences holding each block
        self._tables: dict[int, list[int]] = {}
        self._lens: dict[int, int] = {}

    def num_free_blocks(self):
        return len(self._free)

    def add_sequence(self, seq_id):
        seq_id = self._new_id(seq_id)
        self._tables[seq_id], self._lens[seq_id] = [], 0

    def seq_len(self, seq_id):
        return self._lens[self._known(seq_id)]

    def block_table(self, seq_id):
        return np.array(self._tables[self._known(seq_id)], dtype=np.int64)

    def append(self, seq_id, k, v):
        seq_id = self._known(seq_id)
        k, v = self._tokens(k, v)
        T, bs = k.shape[0], self.block_size
        if T == 0:
            return
        table, start = self._tables[seq_id], self._lens[seq_id]
        copy_tail = start % bs != 0 and self._refs[table[-1]] > 1  # shared, partly filled
        new_blocks = -(-(start + T) // bs) - len(table)
        if new_blocks + copy_tail > len(self._free):
            raise RuntimeError(f"out of blocks: appending {T} tokens needs {new_blocks + copy_tail}, "
                               f"{len(self._free)} free")
        if copy_tail:  # copy-on-write: the other holders keep the original
            copy = self._take()
            self.key_pool[copy], self.value_pool[copy] = self.key_pool[table[-1]], self.value_pool[table[-1]]
            self._release(table[-1])
            table[-1] = copy
        table.extend(self._take() for _ in range(new_blocks))
        positions = start + np.arange(T)  # [T]
        blocks, slots = np.array(table).astype(np.int16)[positions // bs], positions % bs  # compact int16 ids
        self.key_pool[blocks, slots], self.value_pool[blocks, slots] = k, v
        self._lens[seq_id] = start + T

    def fork(self, parent_id, child_id):
        parent, child = self._known(parent_id), self._new_id(child_id)
        self._tables[child], self._lens[child] = list(self._tables[parent]), self._lens[parent]
        self._refs[self._tables[child]] += 1  # shared, nothing copied

    def free(self, seq_id):
        seq_id = self._known(seq_id)
        for block in self._tables.pop(seq_id):
            self._release(block)
        del self._lens[seq_id]

    def _take(self):
        block = self._free.pop()
        self._refs[block] = 1
        return block

    def _release(self, block):
        self._refs[block] -= 1
        if self._refs[block] == 0:
            self._free.append(block)

    def _known(self, seq_id):
        seq_id = operator.index(seq_id)
        if seq_id not in self._lens:
            raise ValueError(f"unknown sequence {seq_id}")
        return seq_id

    def _new_id(self, seq_id):
        seq_id = operator.index(seq_id)
        if seq_id in self._lens:
            raise ValueError(f"sequence {seq_id} already exists")
        return seq_id

    def _tokens(self, k, v):
        want = self.key_pool.shape[2:]
        k, v = np.asarray(k), np.asarray(v)
        if k.ndim != 3 or k.shape[1:] != want or v.shape != k.shape:
            raise ValueError(f"k and v must both be [T, {want[0]}, {want[1]}], got {k.shape} and {v.shape}")
        return k.astype(np.float64), v.astype(np.float64)


class BlockTableSource:
    """A KVSource for the fused kernel: one kv head of one sequence, read via its block table."""

    def __init__(self, cache, seq_id, head):
        self.cache, self.head = cache, head
        self.table = np.asarray(cache.block_table(seq_id))
        self.positions = np.arange(cache.seq_len(seq_id), dtype=np.int64)  # key j is position j

    def __len__(self):
        return len(self.positions)

    def load(self, start, stop):
        p = np.arange(start, stop)
        where = self.table[p // self.cache.key_pool.shape[1]], p % self.cache.key_pool.shape[1]
        return self.cache.key_pool[where][:, self.head], self.cache.value_pool[where][:, self.head]


def paged_attention(cache, seq_id, q):
    L = cache.seq_len(seq_id)
    Hkv, D = cache.key_pool.shape[2:]
    q = np.asarray(q)
    if q.ndim != 3 or q.shape[2] != D or q.shape[1] < 1 or q.shape[1] % Hkv or not 1 <= q.shape[0] <= L:
        raise ValueError(f"q must be [T, Hq, {D}] with 1 <= T <= seq_len = {L} and Hq a multiple of "
                         f"{Hkv} kv heads, got {q.shape}")
    T, Hq, _ = q.shape
    G = Hq // Hkv  # query heads h = j*G .. j*G + G - 1 read kv head j = h // G
    q_pos = np.repeat(np.arange(L - T, L), G)  # [T*G]: the last T positions, each for G heads
    out = np.empty((T, Hq, D))
    for j in range(Hkv):
        group = q[:, j * G:(j + 1) * G].astype(np.float64).reshape(T * G, D)  # [T*G, D]
        o, _ = flash_attention(group, BlockTableSource(cache, seq_id, j), q_pos)
        out[:, j * G:(j + 1) * G] = o.reshape(T, G, D)
    return out
