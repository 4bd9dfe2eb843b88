"""Known wrong: paged_attention fills the causal mask with a finite -1e4 (BERT's masked_fill) instead of
-inf, so where a query's visible scores sit near the bottom of the range the contract allows (-1e4) the
later tokens of a T > 1 call leak into its softmax. Ordinary scores and T = 1 are exact (a blind tester's
answer, round 15, which reached strong_hire until a case put visible scores just above -1e4).
"""
import numpy as np

EXPECTED_DIAGNOSIS = ()  # no classic mistake names it
EXPECTED_LEVEL = "weak"


def _as_int(value, name):
    """An int argument: Python or numpy integer (bools and floats are refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    return int(value)


class PagedKVCache:
    """A pool of ``num_blocks`` blocks of ``block_size`` token slots, shared by many sequences.

    Token p of a sequence lives at pool[table[p // block_size], p % block_size].
    Blocks are reference-counted: fork shares them, an append into a shared partly filled
    last block copies it first, and free returns a block once its last holder is gone.
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int):
        sizes = {}
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size),
                            ("num_kv_heads", num_kv_heads), ("head_dim", head_dim)):
            value = _as_int(value, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
            sizes[name] = value
        self.num_blocks = sizes["num_blocks"]
        self.block_size = sizes["block_size"]
        self.num_kv_heads = sizes["num_kv_heads"]
        self.head_dim = sizes["head_dim"]
        shape = (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)
        self.key_pool = np.zeros(shape, dtype=np.float64)
        self.value_pool = np.zeros(shape, dtype=np.float64)
        self._refcount = [0] * self.num_blocks          # Python ints: no overflow
        self._free = list(range(self.num_blocks - 1, -1, -1))   # a stack; pop() gives 0 first
        self._tables: dict[int, list[int]] = {}
        self._lengths: dict[int, int] = {}

    # ------------------------------------------------------------------ helpers
    def _known(self, seq_id, name="seq_id"):
        seq_id = _as_int(seq_id, name)
        if seq_id not in self._tables:
            raise ValueError(f"unknown {name} {seq_id}")
        return seq_id

    def _unused(self, seq_id, name="seq_id"):
        seq_id = _as_int(seq_id, name)
        if seq_id in self._tables:
            raise ValueError(f"{name} {seq_id} is already in use")
        return seq_id

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
        seq_id = self._unused(seq_id)
        self._tables[seq_id] = []
        self._lengths[seq_id] = 0

    def append(self, seq_id: int, k: np.ndarray, v: np.ndarray) -> None:
        seq_id = self._known(seq_id)
        shapes = []
        for name, array in (("k", k), ("v", v)):
            array = np.asarray(array)
            if array.ndim != 3 or array.shape[1:] != (self.num_kv_heads, self.head_dim):
                raise ValueError(f"{name} must have shape [T, {self.num_kv_heads}, {self.head_dim}], "
                                 f"got {array.shape}")
            if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
                raise ValueError(f"{name} must hold real numbers, got dtype {array.dtype}")
            shapes.append(array.shape)
        if shapes[0] != shapes[1]:
            raise ValueError(f"k and v must have the same shape, got {shapes[0]} and {shapes[1]}")
        T = shapes[0][0]
        if T == 0:
            return
        # Own copies before touching the pools (k or v might even be views of them).
        k = np.array(k, dtype=np.float64)
        v = np.array(v, dtype=np.float64)

        bs = self.block_size
        table = self._tables[seq_id]
        length = self._lengths[seq_id]
        partial_last = length % bs != 0
        needs_copy = partial_last and self._refcount[table[-1]] > 1
        new_blocks = -(-(length + T) // bs) - len(table)
        needed = new_blocks + (1 if needs_copy else 0)
        if needed > len(self._free):
            raise RuntimeError(f"append of {T} tokens to sequence {seq_id} needs {needed} free "
                               f"blocks, only {len(self._free)} are free")

        # From here on nothing can fail.
        if needs_copy:
            old = table[-1]
            new = self._take()
            self.key_pool[new] = self.key_pool[old]
            self.value_pool[new] = self.value_pool[old]
            self._release(old)
            table[-1] = new
        for _ in range(new_blocks):
            table.append(self._take())

        positions = np.arange(length, length + T, dtype=np.int64)
        blocks = np.asarray(table, dtype=np.int64)[positions // bs]
        slots = positions % bs
        self.key_pool[blocks, slots] = k
        self.value_pool[blocks, slots] = v
        self._lengths[seq_id] = length + T

    def seq_len(self, seq_id: int) -> int:
        return self._lengths[self._known(seq_id)]

    def block_table(self, seq_id: int) -> np.ndarray:
        return np.array(self._tables[self._known(seq_id)], dtype=np.int64)

    def fork(self, parent_id: int, child_id: int) -> None:
        parent_id = self._known(parent_id, "parent_id")
        child_id = self._unused(child_id, "child_id")
        table = list(self._tables[parent_id])
        for block in table:
            self._refcount[block] += 1
        self._tables[child_id] = table
        self._lengths[child_id] = self._lengths[parent_id]

    def free(self, seq_id: int) -> None:
        seq_id = self._known(seq_id)
        table = self._tables.pop(seq_id)
        del self._lengths[seq_id]
        for block in reversed(table):
            self._release(block)


def paged_attention(cache: PagedKVCache, seq_id: int, q: np.ndarray) -> np.ndarray:
    """Attention outputs, float64 [T, Hq, D], of the queries q [T, Hq, D] of the sequence's last T tokens.

    Reads the sequence's tokens through its block table (only the seq_len real slots, never
    the stale tail of the last block), causal bottom-right, grouped-query heads
    h -> h // (Hq // Hkv), scale 1/sqrt(D). Computed in float64.
    """
    if isinstance(seq_id, (bool, np.bool_)) or not isinstance(seq_id, (int, np.integer)):
        raise ValueError(f"seq_id must be an int, got {seq_id!r}")
    try:
        length = int(cache.seq_len(seq_id))
    except (KeyError, IndexError) as error:
        raise ValueError(f"unknown seq_id {seq_id}") from error
    key_pool, value_pool = cache.key_pool, cache.value_pool
    _, bs, hkv, d = key_pool.shape

    q = np.asarray(q)
    if q.ndim != 3 or q.shape[2] != d:
        raise ValueError(f"q must have shape [T, Hq, {d}], got {q.shape}")
    if not (np.issubdtype(q.dtype, np.floating) or np.issubdtype(q.dtype, np.integer)):
        raise ValueError(f"q must hold real numbers, got dtype {q.dtype}")
    T, hq, _ = q.shape
    if hq < 1 or hq % hkv != 0:
        raise ValueError(f"Hq = {hq} must be a positive multiple of num_kv_heads = {hkv}")
    if not 1 <= T <= length:
        raise ValueError(f"need 1 <= T <= seq_len = {length}, got T = {T}")

    table = np.asarray(cache.block_table(seq_id), dtype=np.int64)
    positions = np.arange(length, dtype=np.int64)
    blocks, slots = table[positions // bs], positions % bs
    k = np.asarray(key_pool[blocks, slots], dtype=np.float64)     # [L, Hkv, D]
    v = np.asarray(value_pool[blocks, slots], dtype=np.float64)

    group = hq // hkv
    qg = q.astype(np.float64).reshape(T, hkv, group, d)          # head h = g * group + j
    out = np.empty((T, hkv, group, d), dtype=np.float64)
    scale = 1.0 / np.sqrt(d)
    # Query rows in chunks, so the score block stays small even for long prefills.
    rows = max(1, (1 << 22) // max(1, length * hq))
    for start in range(0, T, rows):
        stop = min(start + rows, T)
        scores = np.einsum("tgjd,lgd->gjtl", qg[start:stop], k) * scale    # [Hkv, G, t, L]
        q_pos = np.arange(length - T + start, length - T + stop, dtype=np.int64)
        visible = positions[None, :] <= q_pos[:, None]            # bottom-right causal
        scores = np.where(visible, scores, -1e4)                  # masked_fill, as in BERT
        scores -= scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        out[start:stop] = np.einsum("gjtl,lgd->tgjd", weights, v)
    return out.reshape(T, hq, d)
