"""Calls whose array arguments are the caller's own buffers, which the caller rewrites afterwards, as
a caller that reuses its buffers does, and reads back later.

Every other call's arguments are fresh copies made for that call, which the grader can neither
reach again nor change: a cache that kept a reference to one (a view of a prompt or a chunk, handed
back as its own ``keys``) would never be seen to. Here each array argument lives in memory the child
shares with the grader (``sandbox/shared.py``): the grader rewrites it and reads it back in its own
mapping, so no function the candidate's process could replace takes part in either step. The call
itself is an ordinary call of the candidate's function, made again on the very same array objects
(the child hands out one array per lent buffer), so a memo keyed on their identity is seen.

Used by ring_buffer_window and paged_kv_cache (a cache that keeps a view of a chunk), by
split_kv_decode and varlen_attention (a memo keyed on an argument's identity, met again with new
values) and by the general rules' ``answers_arrays_as_they_are_now``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


# what a check says when a held argument changed after its call (a cache that kept a view of it wrote there)
ARGUMENT_CHANGED = ("(and then filled with other values) was changed by a later call: a function leaves its "
                    "arguments unchanged, later too (the cache kept a reference to it, not a copy)")


@dataclass
class Box:
    """The arguments of a held call, as sent (lent arrays in place of arrays), and the lent ones by index."""
    sent: tuple
    lent: dict  # argument index -> SharedArray

    @property
    def arrays(self) -> tuple[int, ...]:
        """The indexes of the array arguments."""
        return tuple(self.lent)


class Held:
    """Held calls on one exercise's candidate process."""

    def __init__(self, ex):
        self.sandbox = ex.sandbox

    def call(self, fn, *args) -> tuple[object, Box]:
        """``fn(*args)`` in the child with each array argument lent: (the value, the box)."""
        lent = {i: self.sandbox.lend(a) for i, a in enumerate(args) if isinstance(a, np.ndarray)}
        box = Box(tuple(lent.get(i, a) for i, a in enumerate(args)), lent)
        return self.again(fn, box), box

    @staticmethod
    def again(fn, box: Box):
        """``fn`` called again on the very arguments ``box`` holds, as they are now."""
        return fn(*box.sent)

    @staticmethod
    def still_holds(box: Box, indexes: tuple[int, ...], written: list[np.ndarray]) -> bool:
        """Whether the arrays at ``indexes`` still hold what the caller last wrote there (``written``),
        read by the grader in its own mapping."""
        return all(np.array_equal(box.lent[i].read(), w) for i, w in zip(indexes, written))

    @staticmethod
    def overwrite(box: Box, indexes: tuple[int, ...], new: list[np.ndarray]):
        """Write ``new`` into the arrays at ``indexes``, in place (each of the same shape), from the grader's side."""
        for i, values in zip(indexes, new):
            box.lent[i].view[...] = values
