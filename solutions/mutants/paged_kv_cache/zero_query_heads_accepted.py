"""Known wrong (a validation slip): paged_attention checks only Hq % Hkv, so Hq = 0 query heads, which the
prompt names as invalid, returns an empty [T, 0, D] array instead of raising ValueError (a blind tester's
answer, round 16, which reached strong_hire until the checks asked for Hq = 0).
"""
import math

import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_arguments"
EXPECTED_LEVEL = "hire"


def _as_size(x, name) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {x!r}")
    x = int(x)
    if x < 1:
        raise ValueError(f"{name} must be >= 1, got {x}")
    return x


def _as_id(seq_id) -> int:
    if isinstance(seq_id, (bool, np.bool_)) or not isinstance(seq_id, (int, np.integer)):
        raise ValueError(f"sequence ids are ints, got {seq_id!r}")
    return int(seq_id)


class PagedKVCache:
    """A pool of ``num_blocks`` blocks of ``block_size`` token slots, shared by many sequences.

    Token p of a sequence lives at pool[table[p // block_size], p % block_size].
    Blocks are reference-counted; a sequence only ever writes into a block it alone holds.
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int):
        self.num_blocks = _as_size(num_blocks, "num_blocks")
        self.block_size = _as_size(block_size, "block_size")
        self.num_kv_heads = _as_size(num_kv_heads, "num_kv_heads")
        self.head_dim = _as_size(head_dim, "head_dim")
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)
        self.key_pool = np.zeros(shape, np.float64)
        self.value_pool = np.zeros(shape, np.float64)
        self._refcount = np.zeros(self.num_blocks, np.int64)
        self._free = list(range(self.num_blocks - 1, -1, -1))     # a stack: pop() gives 0 first
        self._tables: dict[int, list[int]] = {}
        self._lens: dict[int, int] = {}

    # ------------------------------------------------------------------ bookkeeping
    def _known(self, seq_id) -> int:
        sid = _as_id(seq_id)
        if sid not in self._tables:
            raise ValueError(f"unknown sequence id {seq_id!r}")
        return sid

    def _new(self, seq_id) -> int:
        sid = _as_id(seq_id)
        if sid in self._tables:
            raise ValueError(f"sequence id {seq_id!r} is already in use")
        return sid

    def _take(self) -> int:
        block = self._free.pop()
        self._refcount[block] = 1
        return block

    def _release(self, block: int) -> None:
        self._refcount[block] -= 1
        if self._refcount[block] == 0:
            self._free.append(block)

    # ------------------------------------------------------------------ API
    def num_free_blocks(self) -> int:
        return len(self._free)

    def add_sequence(self, seq_id: int) -> None:
        sid = self._new(seq_id)
        self._tables[sid] = []
        self._lens[sid] = 0

    def seq_len(self, seq_id: int) -> int:
        return self._lens[self._known(seq_id)]

    def block_table(self, seq_id: int) -> np.ndarray:
        return np.array(self._tables[self._known(seq_id)], dtype=np.int64)

    def append(self, seq_id: int, k: np.ndarray, v: np.ndarray) -> None:
        sid = self._known(seq_id)
        k, v = np.asarray(k), np.asarray(v)
        want = (self.num_kv_heads, self.head_dim)
        if k.ndim != 3 or k.shape[1:] != want:
            raise ValueError(f"k must have shape [T, {want[0]}, {want[1]}], got {k.shape}")
        if v.shape != k.shape:
            raise ValueError(f"v must have the shape of k {k.shape}, got {v.shape}")
        T = k.shape[0]
        if T == 0:
            return
        table = self._tables[sid]
        L, bs = self._lens[sid], self.block_size

        # Count every block this append takes before touching anything.
        copy_last = L % bs != 0 and self._refcount[table[-1]] > 1
        new_blocks = math.ceil((L + T) / bs) - len(table)
        needed = new_blocks + int(copy_last)
        if needed > len(self._free):
            raise RuntimeError(f"append of {T} tokens needs {needed} free blocks, "
                               f"only {len(self._free)} are free")

        if copy_last:                                  # copy-on-write of the shared last block
            old = table[-1]
            new = self._take()
            used = L % bs
            self.key_pool[new, :used] = self.key_pool[old, :used]
            self.value_pool[new, :used] = self.value_pool[old, :used]
            self._release(old)
            table[-1] = new
        for _ in range(new_blocks):
            table.append(self._take())

        pos = np.arange(L, L + T)
        blocks = np.asarray(table, np.int64)[pos // bs]
        slots = pos % bs
        self.key_pool[blocks, slots] = k
        self.value_pool[blocks, slots] = v
        self._lens[sid] = L + T

    def fork(self, parent_id: int, child_id: int) -> None:
        pid = self._known(parent_id)
        cid = self._new(child_id)
        table = list(self._tables[pid])
        for block in table:
            self._refcount[block] += 1
        self._tables[cid] = table
        self._lens[cid] = self._lens[pid]

    def free(self, seq_id: int) -> None:
        sid = self._known(seq_id)
        for block in reversed(self._tables[sid]):
            self._release(block)
        del self._tables[sid]
        del self._lens[sid]


def paged_attention(cache: PagedKVCache, seq_id: int, q: np.ndarray) -> np.ndarray:
    """Outputs float64 [T, Hq, D] of the queries q [T, Hq, D] of the sequence's last T tokens."""
    L = int(cache.seq_len(seq_id))              # ValueError for an unknown seq_id
    table = np.asarray(cache.block_table(seq_id), dtype=np.int64)
    key_pool, value_pool = cache.key_pool, cache.value_pool
    _, bs, Hkv, D = key_pool.shape
    q = np.asarray(q)
    if q.ndim != 3:
        raise ValueError(f"q must be [T, Hq, {D}], got shape {q.shape}")
    T, Hq, Dq = q.shape
    if Dq != D:
        raise ValueError(f"q has head_dim {Dq}, the cache {D}")
    if Hq % Hkv != 0:
        raise ValueError(f"Hq = {Hq} query heads is not a multiple of {Hkv} kv heads")
    if not 1 <= T <= L:
        raise ValueError(f"T = {T} queries, but the sequence holds {L} tokens")

    pos = np.arange(L)
    blocks, slots = table[pos // bs], pos % bs
    k = key_pool[blocks, slots].astype(np.float64, copy=False)    # [L, Hkv, D], a gather: a copy
    v = value_pool[blocks, slots].astype(np.float64, copy=False)
    group = Hq // Hkv
    kv_head = np.arange(Hq) // group                               # query head h -> kv head
    k, v = k[:, kv_head], v[:, kv_head]                            # [L, Hq, D]

    qf = q.astype(np.float64)                                      # a copy; q stays untouched
    out = np.empty((T, Hq, D), np.float64)
    scale = 1.0 / math.sqrt(D)
    rows = max(1, (1 << 22) // max(1, Hq * L))                     # bound the score buffer
    for start in range(0, T, rows):
        stop = min(T, start + rows)
        scores = np.einsum("thd,lhd->htl", qf[start:stop], k) * scale    # [Hq, t, L]
        q_pos = L - T + np.arange(start, stop)                     # bottom-right: the last T
        visible = pos[None, :] <= q_pos[:, None]                   # [t, L]
        scores = np.where(visible[None], scores, -np.inf)
        scores -= scores.max(axis=-1, keepdims=True)               # each row sees itself
        w = np.exp(scores)
        w /= w.sum(axis=-1, keepdims=True)
        out[start:stop] = np.einsum("htl,lhd->thd", w, v)
    return out
