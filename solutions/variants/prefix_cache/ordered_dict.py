"""A correct answer written differently: the free queue is an OrderedDict (O(1) removal of a hit,
popitem(last=False) for the front), each sequence keeps its chain of hashes, registrations are
a dict from hash to block and an attribute dict the other way, holders a Counter."""
from collections import Counter, OrderedDict
import operator

import numpy as np

from prefix_hash import block_hash

EXPECTED_LEVEL = "strong_hire"  # what kvgrade verify should see when it grades this variant


def _int(x, name):
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name}: a bool is not an int")
    try:
        return operator.index(x)
    except TypeError:
        raise ValueError(f"{name} must be an integer") from None


class PrefixCache:
    def __init__(self, num_blocks, block_size):
        self.n, self.bs = _int(num_blocks, "num_blocks"), _int(block_size, "block_size")
        if min(self.n, self.bs) < 1:
            raise ValueError("sizes must be at least 1")
        self.free_q = OrderedDict((b, None) for b in range(self.n))
        self.by_hash, self.hash_of = {}, {}
        self.refs = Counter()
        self.seqs = {}  # id -> (tokens, blocks, chain)

    def _get(self, seq_id):
        key = _int(seq_id, "seq_id")
        if key not in self.seqs:
            raise ValueError(f"unknown sequence {key}")
        return key, self.seqs[key]

    def _evict_front(self):
        b, _ = self.free_q.popitem(last=False)
        old = self.hash_of.pop(b, None)
        if old is not None:
            del self.by_hash[old]
        self.refs[b] = 1
        return b

    def add_request(self, seq_id, prompt):
        key = _int(seq_id, "seq_id")
        if key in self.seqs:
            raise ValueError(f"sequence {key} is live")
        arr = np.asarray(prompt) if isinstance(prompt, np.ndarray) else np.asarray(prompt, dtype=object)
        if arr.ndim != 1 or arr.size == 0 or not all(isinstance(t, (int, np.integer)) for t in arr.tolist()):
            raise ValueError("prompt must be a non-empty 1-D sequence of ints")  # any int: past int64 too
        tokens = [int(t) for t in arr.tolist()]
        if min(tokens) < 0:
            raise ValueError("tokens must be >= 0")
        chain, parent = [], None
        for start in range(0, len(tokens) - self.bs + 1, self.bs):
            parent = block_hash(parent, tuple(tokens[start:start + self.bs]))
            chain.append(parent)
        limit = (len(tokens) - 1) // self.bs
        hit = []
        while len(hit) < limit and chain[len(hit)] in self.by_hash:
            hit.append(self.by_hash[chain[len(hit)]])
        total = (len(tokens) + self.bs - 1) // self.bs
        waiting = [b for b in hit if b in self.free_q]
        if total - len(hit) > len(self.free_q) - len(waiting):
            raise RuntimeError("out of KV blocks")
        for b in waiting:
            del self.free_q[b]
        self.refs.update(hit)
        blocks = hit + [self._evict_front() for _ in range(total - len(hit))]
        for b, h in list(zip(blocks, chain))[len(hit):]:
            if h not in self.by_hash:
                self.by_hash[h], self.hash_of[b] = b, h
        self.seqs[key] = (tokens, blocks, chain)
        return self.bs * len(hit)

    def append_token(self, seq_id, token):
        key, (tokens, blocks, chain) = self._get(seq_id)
        token = _int(token, "token")
        if token < 0:
            raise ValueError("tokens must be >= 0")
        if len(tokens) % self.bs == 0:
            if not self.free_q:
                raise RuntimeError("out of KV blocks")
            blocks.append(self._evict_front())
        tokens.append(token)
        if len(tokens) % self.bs == 0:
            chain.append(block_hash(chain[-1] if chain else None, tuple(tokens[-self.bs:])))
            if chain[-1] not in self.by_hash:
                self.by_hash[chain[-1]], self.hash_of[blocks[-1]] = blocks[-1], chain[-1]

    def num_tokens(self, seq_id):
        return len(self._get(seq_id)[1][0])

    def block_table(self, seq_id):
        return np.array(self._get(seq_id)[1][1], dtype=np.int64)

    def free(self, seq_id):
        key, (_, blocks, _) = self._get(seq_id)
        del self.seqs[key]
        for b in reversed(blocks):
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self.free_q[b] = None

    def num_free_blocks(self):
        return len(self.free_q)

    def num_cached_blocks(self):
        return len(self.by_hash)
