"""Calls whose array arguments are the caller's own buffers, which the caller rewrites afterwards, as
a caller that reuses its buffers does, and reads back later.

Every other call's arguments are fresh copies made for that call, which the grader can neither
reach again nor change: a cache that kept a reference to one (a view of a prompt or a chunk, handed
back as its own ``keys``) would never be seen to. Here each array argument lives in memory the child
shares with the grader (``sandbox/shared.py``): the grader rewrites it and reads it back in its own
mapping, so no function the candidate's process could replace takes part in either step. The
arguments are held by a ``collections.deque`` in the child, so a call made again
(``itertools.starmap``) meets the very same objects (a memo keyed on their identity is seen).

Used by ring_buffer_window and paged_kv_cache (a cache that keeps a view of a chunk) and by
split_kv_decode (a memo keyed on an argument's identity, met again with new values).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Box:
    """The arguments of a held call: the child's deque of them, and the arrays lent among them."""
    remote: object
    lent: dict  # argument index -> SharedArray


class Held:
    """The child-side tools, imported once per check."""

    def __init__(self, ex):
        self.sandbox = ex.sandbox
        names = ("builtins", "itertools", "collections")
        self.builtins, self.itertools, self.collections = (ex.helper(n) for n in names)

    def call(self, fn, *args) -> tuple[object, Box]:
        """``fn(*args)`` made in the child with arguments it keeps, each array lent: (the value, the box)."""
        lent = {i: self.sandbox.lend(a) for i, a in enumerate(args) if isinstance(a, np.ndarray)}
        sent = tuple(lent.get(i, a) for i, a in enumerate(args))
        box = Box(self.collections.call("deque", [sent]), lent)
        return self.again(fn, box), box

    def again(self, fn, box: Box):
        """``fn`` called again in the child on the very arguments ``box`` holds, as they are now."""
        return self.builtins.call("next", self.itertools.call("starmap", fn, box.remote))

    @staticmethod
    def read(box: Box, indexes: tuple[int, ...]) -> list[np.ndarray]:
        """The arrays at ``indexes`` as they are now, read by the grader in its own mapping."""
        return [box.lent[i].read() for i in indexes]

    @staticmethod
    def overwrite(box: Box, indexes: tuple[int, ...], new: list[np.ndarray]):
        """Write ``new`` into the arrays at ``indexes``, in place (each of the same shape), from the grader's side."""
        for i, values in zip(indexes, new):
            box.lent[i].view[...] = values
