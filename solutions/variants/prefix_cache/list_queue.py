"""A correct answer written differently: the free queue is a plain list (a hit is removed by a
scan, O(n)), registrations are two dicts (hash -> block and block -> hash), holders a list of
counts, and block hashes are computed as blocks fill, never stored per request but the last."""
import numpy as np

from prefix_hash import block_hash

EXPECTED_LEVEL = "strong_hire"  # what kvgrade verify should see when it grades this variant


def _whole(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{what} must be an int, got {value!r}")
    return int(value)


class PrefixCache:
    def __init__(self, num_blocks, block_size):
        self.num_blocks, self.size = _whole(num_blocks, "num_blocks"), _whole(block_size, "block_size")
        if self.num_blocks < 1 or self.size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.queue = list(range(self.num_blocks))
        self.block_of, self.hash_of = {}, {}
        self.holders = [0] * self.num_blocks
        self.tokens, self.tables, self.last_hash = {}, {}, {}

    def _seq(self, seq_id):
        seq_id = _whole(seq_id, "seq_id")
        if seq_id not in self.tables:
            raise ValueError(f"no sequence {seq_id}")
        return seq_id

    def _pop(self):
        b = self.queue.pop(0)
        if b in self.hash_of:
            del self.block_of[self.hash_of.pop(b)]
        self.holders[b] = 1
        return b

    def _fill(self, b, h):
        if h not in self.block_of:
            self.block_of[h], self.hash_of[b] = b, h

    def add_request(self, seq_id, prompt):
        seq_id = _whole(seq_id, "seq_id")
        if seq_id in self.tables:
            raise ValueError(f"sequence {seq_id} exists")
        if isinstance(prompt, np.ndarray) and prompt.ndim != 1:
            raise ValueError("prompt must be 1-D")
        tokens = [_whole(t, "token") for t in prompt]
        if not tokens or min(tokens) < 0:
            raise ValueError("prompt must be non-empty with tokens >= 0")
        n, hits, h = len(tokens), [], None
        hashes = []
        for j in range(n // self.size):
            h = block_hash(h, tuple(tokens[j * self.size:(j + 1) * self.size]))
            hashes.append(h)
        for j in range((n - 1) // self.size):
            if hashes[j] not in self.block_of:
                break
            hits.append(self.block_of[hashes[j]])
        fresh = -(-n // self.size) - len(hits)
        if fresh > len(self.queue) - sum(b in self.queue for b in hits):
            raise RuntimeError("not enough free blocks")
        for b in hits:
            if b in self.queue:
                self.queue.remove(b)
            self.holders[b] += 1
        table = hits + [self._pop() for _ in range(fresh)]
        for j in range(len(hits), len(hashes)):
            self._fill(table[j], hashes[j])
        self.tokens[seq_id], self.tables[seq_id] = tokens, table
        self.last_hash[seq_id] = hashes[-1] if hashes else None
        return len(hits) * self.size

    def append_token(self, seq_id, token):
        seq_id = self._seq(seq_id)
        token = _whole(token, "token")
        if token < 0:
            raise ValueError("token must be >= 0")
        tokens, table = self.tokens[seq_id], self.tables[seq_id]
        if len(tokens) == len(table) * self.size:
            if not self.queue:
                raise RuntimeError("no free block")
            table.append(self._pop())
        tokens.append(token)
        if len(tokens) % self.size == 0:
            h = block_hash(self.last_hash[seq_id], tuple(tokens[-self.size:]))
            self.last_hash[seq_id] = h
            self._fill(table[-1], h)

    def num_tokens(self, seq_id):
        return len(self.tokens[self._seq(seq_id)])

    def block_table(self, seq_id):
        return np.array(self.tables[self._seq(seq_id)], dtype=np.int64)

    def free(self, seq_id):
        seq_id = self._seq(seq_id)
        table = self.tables.pop(seq_id)
        del self.tokens[seq_id], self.last_hash[seq_id]
        for b in table[::-1]:
            self.holders[b] -= 1
            if not self.holders[b]:
                self.queue.append(b)

    def num_free_blocks(self):
        return len(self.queue)

    def num_cached_blocks(self):
        return len(self.block_of)
