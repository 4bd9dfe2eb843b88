"""Known-wrong: paged_attention shifts each row by its max over every key, the ones the row may not see
included, then masks by multiplying exp by the causal mask: when a later key scores thousands above
the visible ones (allowed: scores up to 1e4), every visible weight underflows to 0 and the row is NaN.
A blind tester's answer (round 14), otherwise correct."""
from collections import deque
import math
import numbers
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"


def _int(name, x):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Integral):
        raise ValueError(f"{name} must be an int, got {x!r}")
    return int(x)


class _Seq:
    __slots__ = ("blocks", "length")

    def __init__(self, blocks, length):
        self.blocks = blocks
        self.length = length


class PagedKVCache:
    def __init__(self, num_blocks, block_size, num_kv_heads, head_dim):
        sizes = {"num_blocks": num_blocks, "block_size": block_size,
                 "num_kv_heads": num_kv_heads, "head_dim": head_dim}
        for name, val in sizes.items():
            if _int(name, val) < 1:
                raise ValueError(f"{name} must be >= 1, got {val}")
        self.num_blocks = int(num_blocks)
        self.block_size = int(block_size)
        self.num_kv_heads = int(num_kv_heads)
        self.head_dim = int(head_dim)
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)
        self.key_pool = np.zeros(shape)
        self.value_pool = np.zeros(shape)
        self._free = deque(range(self.num_blocks))
        self._refs = [0] * self.num_blocks
        self._seqs = {}

    def _get(self, seq_id):
        sid = _int("seq_id", seq_id)
        if sid not in self._seqs:
            raise ValueError(f"no sequence with id {sid}")
        return self._seqs[sid]

    def _check_new(self, seq_id):
        sid = _int("seq_id", seq_id)
        if sid in self._seqs:
            raise ValueError(f"sequence id {sid} is already in use")
        return sid

    def num_free_blocks(self):
        return len(self._free)

    def add_sequence(self, seq_id):
        sid = self._check_new(seq_id)
        self._seqs[sid] = _Seq([], 0)

    def seq_len(self, seq_id):
        return self._get(seq_id).length

    def block_table(self, seq_id):
        return np.array(self._get(seq_id).blocks, dtype=np.int64)

    def append(self, seq_id, k, v):
        seq = self._get(seq_id)
        k = np.asarray(k)
        v = np.asarray(v)
        expected = (self.num_kv_heads, self.head_dim)
        if k.ndim != 3 or k.shape[1:] != expected:
            raise ValueError(f"k has shape {k.shape}, expected [T, {expected[0]}, {expected[1]}]")
        if v.ndim != 3 or v.shape != k.shape:
            raise ValueError(f"v has shape {v.shape}, expected {k.shape} like k")
        T = k.shape[0]
        if T == 0:
            return

        bs = self.block_size
        used = seq.length % bs              # tokens already in the last block (0: full or none)
        must_copy = used > 0 and self._refs[seq.blocks[-1]] > 1
        room = bs - used if used > 0 else 0
        extra = max(0, T - room)
        fresh = (extra + bs - 1) // bs
        if fresh + int(must_copy) > len(self._free):
            raise RuntimeError(f"out of blocks: need {fresh + int(must_copy)}, "
                               f"have {len(self._free)}")

        if must_copy:
            shared = seq.blocks[-1]
            mine = self._free.popleft()
            self._refs[mine] = 1
            self.key_pool[mine, :used] = self.key_pool[shared, :used]
            self.value_pool[mine, :used] = self.value_pool[shared, :used]
            self._refs[shared] -= 1          # the others still hold it, so it stays taken
            seq.blocks[-1] = mine

        written = 0
        pos = seq.length
        while written < T:
            slot = pos % bs
            if slot == 0:
                blk = self._free.popleft()
                self._refs[blk] = 1
                seq.blocks.append(blk)
            else:
                blk = seq.blocks[-1]
            n = min(bs - slot, T - written)
            self.key_pool[blk, slot:slot + n] = k[written:written + n]
            self.value_pool[blk, slot:slot + n] = v[written:written + n]
            written += n
            pos += n
        seq.length = pos

    def fork(self, parent_id, child_id):
        parent = self._get(parent_id)
        cid = self._check_new(child_id)
        for b in parent.blocks:
            self._refs[b] += 1
        self._seqs[cid] = _Seq(list(parent.blocks), parent.length)

    def free(self, seq_id):
        seq = self._get(seq_id)
        del self._seqs[_int("seq_id", seq_id)]
        for b in seq.blocks:
            self._refs[b] -= 1
            if self._refs[b] == 0:
                self._free.append(b)


def paged_attention(cache, seq_id, q):
    L = cache.seq_len(seq_id)
    table = cache.block_table(seq_id)
    num_blocks, bs, Hkv, D = cache.key_pool.shape
    q = np.asarray(q)
    if q.ndim != 3 or q.shape[2] != D or q.shape[1] == 0:
        raise ValueError(f"q must be [T, Hq, {D}] with Hq >= 1, got {q.shape}")
    T, Hq, _ = q.shape
    if Hq % Hkv != 0:
        raise ValueError(f"{Hq} query heads is not a multiple of {Hkv} kv heads")
    if T < 1 or T > L:
        raise ValueError(f"need 1 <= T <= seq_len ({L}), got T = {T}")
    group = Hq // Hkv

    # Copy out the sequence's tokens block by block; the last block only up to seq_len.
    keys = np.empty((L, Hkv, D))
    vals = np.empty((L, Hkv, D))
    for j in range(len(table)):
        lo = j * bs
        n = min(bs, L - lo)
        keys[lo:lo + n] = cache.key_pool[table[j], :n]
        vals[lo:lo + n] = cache.value_pool[table[j], :n]

    first = L - T                                   # position of the first query
    causal = np.arange(L)[None, :] <= (first + np.arange(T))[:, None]
    out = np.empty((T, Hq, D))
    for h in range(Hq):
        kv = h // group
        s = (q[:, h, :].astype(np.float64) @ keys[:, kv, :].T) / math.sqrt(D)
        s = s - s.max(axis=1, keepdims=True)
        w = np.exp(s) * causal
        out[:, h, :] = (w @ vals[:, kv, :]) / w.sum(axis=1, keepdims=True)
    return out
