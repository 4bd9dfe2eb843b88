"""A slow, obviously right model of prefix_cache, and the known mistakes as switches on it.

The model keeps what the contract talks about and nothing more: the free queue as a plain deque
(front first), the registrations as a dict from chain hash to block (and its inverse, so a block
taken from a pool past 2^16 blocks drops its registrations at once), each block's holders as a
count, and each live sequence's tokens, blocks and chain hashes. Every operation is defined for
every argument the grader sends, invalid ones included (ValueError or RuntimeError, with nothing
changed), so any subsequence of a valid operation sequence is a valid test.

``Model(num_blocks, block_size, mistakes)`` behaves as a submission that makes the named
mistakes (ids of section 5); the diagnoses replay a failing sequence on such models.
"""
from __future__ import annotations

import importlib.util
import math
from collections import deque

import numpy as np

from grader.catalog import KIT_ROOT


def _kit_block_hash():
    """The kit's own block_hash (the one the candidate calls), loaded under a private name."""
    path = KIT_ROOT / "exercises" / "prefix_cache" / "prefix_hash.py"
    spec = importlib.util.spec_from_file_location("_kvgrade_prefix_hash", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.block_hash


block_hash = _kit_block_hash()

MISTAKES = ("unchained_hash", "parent_from_registration", "partial_block_cached", "last_token_served",
            "held_block_evicted", "held_block_returned", "stale_registration", "stale_on_append", "lifo_eviction",
            "head_first_free")


class Refused(Exception):
    """The operation raises ``kind`` (ValueError or RuntimeError) and changes nothing."""

    def __init__(self, kind: str, why: str):
        super().__init__(why)
        self.kind = kind


def is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


class Model:
    def __init__(self, num_blocks, block_size, mistakes=frozenset()):
        if not (is_int(num_blocks) and is_int(block_size)) or num_blocks < 1 or block_size < 1:
            raise Refused("ValueError", "sizes must be ints >= 1")
        unknown = set(mistakes) - set(MISTAKES)
        assert not unknown, unknown
        self.num_blocks, self.block_size, self.mistakes = int(num_blocks), int(block_size), frozenset(mistakes)
        self.queue = deque(range(self.num_blocks))  # free blocks, front first (a mistake may put one in twice)
        self.registry: dict[int, int] = {}  # chain hash -> block
        self.hashes_of: dict[int, list] = {}  # block -> the hashes registered on it (the inverse of registry)
        self.holders = [0] * self.num_blocks
        self.seqs: dict[int, dict] = {}  # seq_id -> {"tokens", "blocks", "hashes"}

    # -- operations --------------------------------------------------------------------------

    def add_request(self, seq_id, prompt) -> int:
        seq_id = self._new_id(seq_id)
        tokens = self._prompt(prompt)
        bs, n = self.block_size, len(tokens)
        hashes = self._chain(None, tokens, n // bs)
        servable = n // bs if "last_token_served" in self.mistakes else (n - 1) // bs
        hits = []
        for h in hashes[:servable]:
            if h not in self.registry:
                break
            hits.append(self.registry[h])
        needed = math.ceil(n / bs) - len(hits)
        waiting = list(dict.fromkeys(b for b in hits if b in self.queue))  # a block may be hit twice under mistakes
        if "held_block_evicted" in self.mistakes:
            waiting = []  # a hit block is left in the queue, to be handed out again
        if needed > len(self.queue) - len(waiting):
            raise Refused("RuntimeError", "out of blocks")
        for b in waiting:
            self.queue.remove(b)
        for b in hits:
            self.holders[b] += 1
        blocks = hits + [self._take() for _ in range(needed)]
        for b, h in zip(blocks[len(hits):], hashes[len(hits):]):
            self._register(b, h)
        if "partial_block_cached" in self.mistakes and n % bs:
            self._register(blocks[-1], block_hash(hashes[-1] if hashes else None, tuple(tokens[n - n % bs:])))
        self.seqs[seq_id] = {"tokens": tokens, "blocks": blocks, "hashes": hashes}
        return len(hits) * bs

    def append_token(self, seq_id, token) -> None:
        seq = self.seqs[self._known(seq_id)]
        token = self._token(token)
        if len(seq["tokens"]) % self.block_size == 0:
            if not self.queue:
                raise Refused("RuntimeError", "out of blocks")
            seq["blocks"].append(self._take(appending=True))
        seq["tokens"].append(token)
        if len(seq["tokens"]) % self.block_size == 0:
            parent = seq["hashes"][-1] if seq["hashes"] else None
            if "parent_from_registration" in self.mistakes:  # None for a block that repeats a registered hash
                before = seq["blocks"][-2] if len(seq["blocks"]) > 1 else None
                parent = next((h for h, b in self.registry.items() if b == before), None)
            seq["hashes"] += self._chain(parent, seq["tokens"][-self.block_size:], 1)
            self._register(seq["blocks"][-1], seq["hashes"][-1])

    def num_tokens(self, seq_id) -> int:
        return len(self.seqs[self._known(seq_id)]["tokens"])

    def block_table(self, seq_id) -> np.ndarray:
        return np.array(self.seqs[self._known(seq_id)]["blocks"], dtype=np.int64)

    def free(self, seq_id) -> None:
        blocks = self.seqs.pop(self._known(seq_id))["blocks"]
        for b in (blocks if "head_first_free" in self.mistakes else reversed(blocks)):
            self.holders[b] -= 1
            if self.holders[b] == 0 or "held_block_returned" in self.mistakes:
                self.queue.appendleft(b) if "lifo_eviction" in self.mistakes else self.queue.append(b)

    def num_free_blocks(self) -> int:
        return len(self.queue)

    def num_cached_blocks(self) -> int:
        return len(self.registry)

    # -- what the operations share -----------------------------------------------------------------

    def _chain(self, parent, tokens, count):
        hashes, bs = [], self.block_size
        for j in range(count):
            h = block_hash(None if "unchained_hash" in self.mistakes else parent, tuple(tokens[j * bs:(j + 1) * bs]))
            hashes.append(h)
            parent = h
        return hashes

    def _take(self, appending=False) -> int:
        b = self.queue.popleft()
        if "stale_registration" not in self.mistakes and not (appending and "stale_on_append" in self.mistakes):
            for h in self.hashes_of.pop(b, ()):
                del self.registry[h]
        self.holders[b] = 1
        return b

    def _register(self, b, h):
        if h not in self.registry:
            self.registry[h] = b
            self.hashes_of.setdefault(b, []).append(h)

    def _known(self, seq_id) -> int:
        if not is_int(seq_id) or int(seq_id) not in self.seqs:
            raise Refused("ValueError", f"unknown seq_id {seq_id!r}")
        return int(seq_id)

    def _new_id(self, seq_id) -> int:
        if not is_int(seq_id) or int(seq_id) in self.seqs:
            raise Refused("ValueError", f"seq_id {seq_id!r} in use")
        return int(seq_id)

    def _token(self, token) -> int:
        if not is_int(token) or token < 0:
            raise Refused("ValueError", f"bad token {token!r}")
        return int(token)

    def _prompt(self, prompt) -> list:
        if isinstance(prompt, np.ndarray):
            prompt = prompt.tolist() if prompt.ndim == 1 and prompt.dtype.kind == "i" else None
        if not isinstance(prompt, (list, tuple)) or not prompt:
            raise Refused("ValueError", "bad prompt")
        return [self._token(t) for t in prompt]

    # -- what the grader compares -----------------------------------------------------------------

    def apply(self, op):
        """Run ``op`` (a ``stateful.Op``); its outcome: ("ok", value) or ("raises", kind). A refused
        operation leaves the model as it was (validation runs before any change)."""
        saved = (deque(self.queue), dict(self.registry), {b: list(h) for b, h in self.hashes_of.items()},
                 list(self.holders), {s: {k: list(v) for k, v in q.items()} for s, q in self.seqs.items()})
        try:
            return ("ok", getattr(self, op.name)(*op.args))
        except Refused as refused:
            self.queue, self.registry, self.hashes_of, self.holders, self.seqs = saved
            return ("raises", refused.kind)

    def observe(self, ids) -> dict:
        """Every observable: the two counts, and for each of ``ids`` its (num_tokens, block table),
        or None for an id that is not live."""
        seqs = {s: (len(self.seqs[s]["tokens"]), list(self.seqs[s]["blocks"])) if s in self.seqs else None
                for s in ids}
        return {"free": self.num_free_blocks(), "cached": self.num_cached_blocks(), "seqs": seqs}
