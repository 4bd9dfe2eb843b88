"""Known-wrong: the block table is kept as int16 and widened for the caller, so block ids past 32767 come back negative (red team 27)."""
import math
import operator

import numpy as np

from prefix_hash import block_hash

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = 'weak'


def _int(value, what: str) -> int:
    """A Python int from an int or a numpy integer; ValueError for anything else."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{what} must be an int, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an int, got {type(value).__name__}") from None


def _size(value, what: str) -> int:
    n = _int(value, what)
    if n < 1:
        raise ValueError(f"{what} must be >= 1, got {n}")
    return n


def _token(value, what: str = "token") -> int:
    t = _int(value, what)
    if t < 0:
        raise ValueError(f"{what} must be >= 0, got {t}")
    return t


def _prompt(prompt) -> list[int]:
    """The prompt as a new list of Python ints (the cache keeps its own copy)."""
    if isinstance(prompt, np.ndarray):
        if prompt.ndim != 1 or prompt.dtype.kind not in "iu":
            raise ValueError(f"prompt must be a 1-D integer array, got {prompt.dtype} of shape {prompt.shape}")
        prompt = prompt.tolist()
    elif not isinstance(prompt, (list, tuple)):
        raise ValueError(f"prompt must be a list, a tuple or a 1-D integer array, got {type(prompt).__name__}")
    tokens = [_token(t, "every prompt token") for t in prompt]
    if not tokens:
        raise ValueError("prompt must hold at least one token")
    return tokens


class Block:
    """One KV block: its id, how many sequences hold it, the hash it is registered under, and
    its neighbours in the free queue while it waits there."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev_free", "next_free")

    def __init__(self, block_id: int):
        self.block_id, self.ref_cnt, self.block_hash = block_id, 0, None
        self.prev_free = self.next_free = None


class FreeBlockQueue:
    """Blocks no sequence holds, oldest first: a doubly linked list between two sentinels."""

    def __init__(self, blocks: list[Block]):
        self.head, self.tail = Block(-1), Block(-1)
        self.head.next_free, self.tail.prev_free = self.tail, self.head
        self.size = 0
        for block in blocks:
            self.append(block)

    def __len__(self) -> int:
        return self.size

    def append(self, block: Block):
        last = self.tail.prev_free
        last.next_free, block.prev_free = block, last
        block.next_free, self.tail.prev_free = self.tail, block
        self.size += 1

    def remove(self, block: Block):
        block.prev_free.next_free, block.next_free.prev_free = block.next_free, block.prev_free
        block.prev_free = block.next_free = None
        self.size -= 1

    def popleft(self) -> Block:
        block = self.head.next_free
        self.remove(block)
        return block


class Request:
    """A live sequence: its tokens, its blocks in order, and the chain hashes of its full blocks."""

    def __init__(self, tokens: list[int], blocks: list[Block], hashes: list[int]):
        self.tokens, self.blocks, self.hashes = tokens, blocks, hashes


class PrefixCache:
    def __init__(self, num_blocks: int, block_size: int):
        num_blocks = _size(num_blocks, "num_blocks")
        self.block_size = _size(block_size, "block_size")
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free_queue = FreeBlockQueue(self.blocks)
        self.cached: dict[int, Block] = {}  # chain hash -> the block registered under it
        self.requests: dict[int, Request] = {}

    # -- the public API ------------------------------------------------------------------------

    def add_request(self, seq_id: int, prompt) -> int:
        seq_id = _int(seq_id, "seq_id")
        if seq_id in self.requests:
            raise ValueError(f"seq_id {seq_id} is already in use")
        tokens = _prompt(prompt)
        hashes = self._chain(None, tokens, len(tokens) // self.block_size)
        hits = self._longest_hit(hashes[:(len(tokens) - 1) // self.block_size])  # the last token is computed
        needed = math.ceil(len(tokens) / self.block_size) - len(hits)
        waiting = sum(block.ref_cnt == 0 for block in hits)  # hits that are themselves in the queue
        if needed > len(self.free_queue) - waiting:
            raise RuntimeError(f"the prompt needs {needed} new blocks; {len(self.free_queue) - waiting} are free")
        for block in hits:
            if block.ref_cnt == 0:
                self.free_queue.remove(block)
            block.ref_cnt += 1
        blocks = hits + [self._take() for _ in range(needed)]
        for block, h in zip(blocks[len(hits):], hashes[len(hits):]):
            self._register(block, h)
        self.requests[seq_id] = Request(tokens, blocks, hashes)
        return len(hits) * self.block_size

    def append_token(self, seq_id: int, token: int) -> None:
        request = self._request(seq_id)
        token = _token(token)
        if len(request.tokens) % self.block_size == 0:
            if not len(self.free_queue):
                raise RuntimeError("no free block for the new token")
            request.blocks.append(self._take())
        request.tokens.append(token)
        if len(request.tokens) % self.block_size == 0:
            parent = request.hashes[-1] if request.hashes else None
            request.hashes += self._chain(parent, request.tokens[-self.block_size:], 1)
            self._register(request.blocks[-1], request.hashes[-1])

    def num_tokens(self, seq_id: int) -> int:
        return len(self._request(seq_id).tokens)

    def block_table(self, seq_id: int) -> np.ndarray:
        # the table kept compact (int16 block ids), widened for the caller
        compact = np.array([block.block_id for block in self._request(seq_id).blocks]).astype(np.int16)
        return compact.astype(np.int64)

    def free(self, seq_id: int) -> None:
        request = self._request(seq_id)
        del self.requests[_int(seq_id, "seq_id")]
        for block in reversed(request.blocks):  # the tail first: it is evicted before its prefix
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.free_queue.append(block)

    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    def num_cached_blocks(self) -> int:
        return len(self.cached)

    # -- blocks and hashes -----------------------------------------------------------------------

    def _request(self, seq_id) -> Request:
        seq_id = _int(seq_id, "seq_id")
        if seq_id not in self.requests:
            raise ValueError(f"unknown seq_id {seq_id}")
        return self.requests[seq_id]

    def _chain(self, parent, tokens: list[int], count: int) -> list[int]:
        """Chain hashes of the first ``count`` full blocks of ``tokens``, after ``parent``."""
        hashes, size = [], self.block_size
        for j in range(count):
            parent = block_hash(parent, tuple(tokens[j * size:(j + 1) * size]))
            hashes.append(parent)
        return hashes

    def _longest_hit(self, hashes: list[int]) -> list[Block]:
        hits = []
        for h in hashes:
            block = self.cached.get(h)
            if block is None:
                break
            hits.append(block)
        return hits

    def _take(self) -> Block:
        """The block at the front of the queue, its old registration ended (it is evicted)."""
        block = self.free_queue.popleft()
        if block.block_hash is not None:
            del self.cached[block.block_hash]
            block.block_hash = None
        block.ref_cnt = 1
        return block

    def _register(self, block: Block, h: int):
        if h not in self.cached:  # a block that repeats a registered prefix stays unregistered
            self.cached[h], block.block_hash = block, h
