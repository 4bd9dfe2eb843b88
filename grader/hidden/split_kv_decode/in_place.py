"""Calls whose array arguments stay in the candidate's process, so the grader can rewrite them in place
between two calls, as a caller that reuses its buffers does (a decode loop writing each step's
queries, or a batch's shared prompt, into the same arrays).

Every other call's arguments are fresh copies made for that call: a memo keyed on an argument's
identity (``id(prefix_k)``), or on its shape, never meets the same object with other values there.
Here the arguments are held by a ``collections.deque`` in the child, the candidate's function is
called on them by ``itertools.starmap``, and ``numpy.copyto`` rewrites them, all with the standard
library and numpy (no kit file is needed). The same technique as ring_buffer_window's ``held.py``;
a candidate for ``grader/checking.py``.
"""
from __future__ import annotations

import numpy as np


class InPlace:
    """The child-side tools, imported once per check."""

    def __init__(self, ex):
        names = ("builtins", "itertools", "operator", "collections", "numpy")
        self.builtins, self.itertools, self.operator, self.collections, self.numpy = (ex.helper(n) for n in names)

    def hold(self, args: tuple):
        """The arguments, kept in the child: a box to call with and to rewrite."""
        return self.collections.call("deque", [tuple(args)])

    def call(self, fn, box):
        """``fn(*args)`` in the child on the very arguments the box holds."""
        return self.builtins.call("next", self.itertools.call("starmap", fn, box))

    def rewrite(self, box, indexes: tuple[int, ...], new: list[np.ndarray]):
        """Write ``new`` into the arguments at ``indexes``, in place (each of the same shape and dtype)."""
        getter = self.operator.call("itemgetter", *indexes)
        rows = self.builtins.call("map", getter, box)
        targets = self.itertools.chain.call("from_iterable", rows) if len(indexes) > 1 else rows
        self.builtins.call("list", self.builtins.call("map", self.numpy.copyto, targets, new))
