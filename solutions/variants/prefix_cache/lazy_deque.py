"""A correct answer written differently: the free queue is a deque with lazy deletion (a hit is
only marked as held; stale entries are skipped when they reach the front, and every return to
the queue gets a fresh stamp), the chain of hashes is recomputed from the tokens when needed,
and each block records its own registration."""
from collections import deque

import numpy as np

from prefix_hash import block_hash

EXPECTED_LEVEL = "strong_hire"  # what kvgrade verify should see when it grades this variant


def _as_int(x, what):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"{what}: expected an int, got {type(x).__name__}")
    return int(x)


class PrefixCache:
    def __init__(self, num_blocks, block_size):
        num_blocks, block_size = _as_int(num_blocks, "num_blocks"), _as_int(block_size, "block_size")
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be positive")
        self.B = block_size
        self.stamp = [0] * num_blocks  # the stamp of a block's live entry in the queue
        self.queue = deque((b, 0) for b in range(num_blocks))
        self.waiting = set(range(num_blocks))
        self.refs = [0] * num_blocks
        self.registered = [None] * num_blocks  # the hash each block is registered under
        self.lookup = {}
        self.seqs = {}

    def _front(self):
        while True:
            b, stamp = self.queue.popleft()
            if b in self.waiting and stamp == self.stamp[b]:
                return b

    def _grab(self):
        b = self._front()
        self.waiting.discard(b)
        if self.registered[b] is not None:
            del self.lookup[self.registered[b]]
            self.registered[b] = None
        self.refs[b] = 1
        return b

    def _release(self, b):
        self.stamp[b] += 1
        self.queue.append((b, self.stamp[b]))
        self.waiting.add(b)

    def _hash_upto(self, tokens, count):
        h, out = None, []
        for j in range(count):
            h = block_hash(h, tuple(tokens[j * self.B:(j + 1) * self.B]))
            out.append(h)
        return out

    def _offer(self, b, h):
        if h not in self.lookup:
            self.lookup[h], self.registered[b] = b, h

    def _live(self, seq_id):
        seq_id = _as_int(seq_id, "seq_id")
        if seq_id not in self.seqs:
            raise ValueError(f"seq_id {seq_id} is not live")
        return seq_id

    def add_request(self, seq_id, prompt):
        seq_id = _as_int(seq_id, "seq_id")
        if seq_id in self.seqs:
            raise ValueError(f"seq_id {seq_id} is live")
        if isinstance(prompt, np.ndarray):
            if prompt.ndim != 1:
                raise ValueError("prompt must be 1-D")
            prompt = prompt.tolist()
        tokens = [_as_int(t, "token") for t in prompt]
        if not tokens or any(t < 0 for t in tokens):
            raise ValueError("prompt must be non-empty and tokens >= 0")
        hashes = self._hash_upto(tokens, len(tokens) // self.B)
        hits = []
        for h in hashes[:(len(tokens) - 1) // self.B]:
            if h not in self.lookup:
                break
            hits.append(self.lookup[h])
        more = -(-len(tokens) // self.B) - len(hits)
        if more > len(self.waiting) - len(self.waiting.intersection(hits)):
            raise RuntimeError("out of blocks")
        for b in hits:
            self.waiting.discard(b)  # its queue entry goes stale
            self.refs[b] += 1
        blocks = hits + [self._grab() for _ in range(more)]
        for j in range(len(hits), len(hashes)):
            self._offer(blocks[j], hashes[j])
        self.seqs[seq_id] = (tokens, blocks)
        return len(hits) * self.B

    def append_token(self, seq_id, token):
        tokens, blocks = self.seqs[self._live(seq_id)]
        token = _as_int(token, "token")
        if token < 0:
            raise ValueError("token must be >= 0")
        if len(tokens) == len(blocks) * self.B:
            if not self.waiting:
                raise RuntimeError("out of blocks")
            blocks.append(self._grab())
        tokens.append(token)
        if len(tokens) % self.B == 0:
            self._offer(blocks[-1], self._hash_upto(tokens, len(tokens) // self.B)[-1])

    def num_tokens(self, seq_id):
        return len(self.seqs[self._live(seq_id)][0])

    def block_table(self, seq_id):
        return np.asarray(self.seqs[self._live(seq_id)][1], dtype=np.int64)

    def free(self, seq_id):
        _, blocks = self.seqs.pop(self._live(seq_id))
        for b in blocks[::-1]:
            self.refs[b] -= 1
            if self.refs[b] == 0:
                self._release(b)

    def num_free_blocks(self):
        return len(self.waiting)

    def num_cached_blocks(self):
        return len(self.lookup)
