"""Memory the grader and one child both map: arrays a check lends the candidate as a caller's own
buffers, which the grader then rewrites and reads back in its own process.

An argument sent over the wire is a copy that the grader can never reach again. A check of "the
cache keeps its own copy of what it stores" needs the caller's array itself: the grader writes new
values into it after the call, as a caller that reuses its buffers does, and later reads it back to
see whether a call wrote into it. Done by the child's own functions, both steps could be forged by
candidate code in that process (a ``numpy.copyto`` replaced by a no-op hides a cache that keeps
views). Done here, by the grader in its own mapping, they cannot: what the child sees is memory
changing under it, and what the grader reads is what is there.

The memory is a sealed memfd (its size can neither shrink nor grow, so no child can make the
grader's reads fault), passed to the child at its start. Only numeric arrays go in it, so whatever
bytes the child writes there, the grader reads numbers.
"""
from __future__ import annotations

import fcntl
import mmap
import os

import numpy as np

from .wire import LAYOUTS, LENT_ALIGN, over_memory

ARENA_BYTES = 4 << 20  # lent buffers of one child (most checks lend about 24 KiB; gpt2_decode 2.4 MiB, the
# weights of the runs whose weights change between steps and the arrays that replace them); counts in its address
# space


class ArenaFull(RuntimeError):
    """The checks lent more than ``ARENA_BYTES`` to one child: the kit's limit, not the candidate's fault."""


class Arena:
    """One child's shared memory, as the grader maps it; arrays are placed one after another."""

    def __init__(self, size: int = ARENA_BYTES):
        self.size, self._next = size, 0
        self.fd = os.memfd_create("kvgrade-lent", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise

    def place(self, arr: np.ndarray, layout: str = "C") -> SharedArray:
        """A copy of ``arr`` in shared memory (same dtype and shape), laid out in ``layout``: "C", "F" or
        "reversed" (C order reversed along every axis), as the arrays a call is sent come."""
        arr = np.asarray(arr)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"only numeric arrays are lent in shared memory, not {arr.dtype}")
        offset = -(-self._next // LENT_ALIGN) * LENT_ALIGN
        if offset + arr.nbytes > self.size:
            raise ArenaFull(f"the checks lent more than {self.size >> 20} MiB of buffers to one child")
        self._next = offset + max(arr.nbytes, 1)
        lent = SharedArray(self, offset, arr.dtype, arr.shape, layout)
        lent.view[...] = arr
        return lent

    def close_descriptor(self):
        """The child has its own copy of the descriptor once started: ours is no longer needed."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class SharedArray:
    """An array in an :class:`Arena`: the child receives it as an ndarray over the same memory."""

    def __init__(self, arena: Arena, offset: int, dtype: np.dtype, shape: tuple, layout: str = "C"):
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        self.arena, self.offset, self.dtype, self.shape = arena, offset, np.dtype(dtype), tuple(shape)
        self.layout = layout

    @property
    def view(self) -> np.ndarray:
        """The memory as it is now, in the grader's own mapping (writes go straight to the child)."""
        return over_memory(self.arena._map, self.offset, self.dtype, self.shape, self.layout)

    def read(self) -> np.ndarray:
        """A copy of what the memory holds now, whatever the child has written there since."""
        return self.view.copy()

    def tag(self) -> dict:
        return {"$shared": [self.offset, self.dtype.str, list(self.shape), self.layout]}

    def __repr__(self):
        return f"<lent {self.dtype}[{', '.join(map(str, self.shape))}]>"
