"""Calls whose array arguments stay in the candidate's process, where the grader can change them
afterwards, as a caller that reuses its buffers does, and read them back later.

Every other call's arguments are fresh copies made for that call, which the grader can neither
reach again nor change: a cache that kept a reference to one (a view of a prompt or a chunk,
handed back as its own ``keys``) would never be seen to. The toolkit's own probe of kept
arguments counts references to the argument object itself, so it misses a view of an argument
built by the wire (its base is the message buffer, not the argument). Here the arguments are held
by a ``collections.deque`` in the child and the call is made there by ``itertools.starmap``; the
grader then overwrites them with ``numpy.copyto`` and reads them back through the same deque,
all with the standard library and numpy (no kit file of the exercise's own is needed).

Used by ring_buffer_window and paged_kv_cache (a cache that keeps a view of a chunk) and by
split_kv_decode (a memo keyed on an argument's identity, met again with new values).
"""
from __future__ import annotations

import numpy as np


class Held:
    """The child-side tools, imported once per check."""

    def __init__(self, ex):
        names = ("builtins", "itertools", "operator", "collections", "numpy")
        self.builtins, self.itertools, self.operator, self.collections, self.numpy = (ex.helper(n) for n in names)
        self.chain, self._getters = self.itertools.chain, {}

    def call(self, fn, *args) -> tuple[object, object]:
        """``fn(*args)`` made in the child with arguments it keeps: (the value, the arguments' box)."""
        box = self.collections.call("deque", [tuple(args)])
        return self.builtins.call("next", self.itertools.call("starmap", fn, box)), box

    def again(self, fn, box):
        """``fn`` called again in the child on the very arguments ``box`` holds, as they are now."""
        return self.builtins.call("next", self.itertools.call("starmap", fn, box))

    def _items(self, box, indexes):
        getter = self._getters.get(indexes)
        if getter is None:
            getter = self._getters[indexes] = self.operator.call("itemgetter", *indexes)
        rows = self.builtins.call("map", getter, box)
        return self.chain.call("from_iterable", rows) if len(indexes) > 1 else rows

    def read(self, box, indexes: tuple[int, ...]) -> list:
        """The arguments at ``indexes`` as they are now in the child."""
        return self.builtins.call("list", self._items(box, indexes))

    def overwrite(self, box, indexes: tuple[int, ...], new: list[np.ndarray]):
        """Write ``new`` into the arguments at ``indexes``, in place (each of the same shape)."""
        self.builtins.call("list", self.builtins.call("map", self.numpy.copyto, self._items(box, indexes), new))
