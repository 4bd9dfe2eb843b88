"""The KV source the grader lends to a candidate's kernel: K and V stay here, every load is logged.

The candidate's process gets a stand-in whose ``load`` asks this object for each range, so
the log below is what the kernel really read, whatever it does on its side.
"""
from __future__ import annotations

import numpy as np

from grader.sandbox import Lent


class KVSource(Lent):
    """S keys and values with their stored positions (-1 = empty slot); ``load`` is logged."""

    wire_type, wire_methods = "KVSource", ("load",)

    def __init__(self, k: np.ndarray, v: np.ndarray, positions: np.ndarray):
        self.k, self.v = k, v
        self.positions = np.asarray(positions, dtype=np.int64)
        self.loads: list[tuple[int, int]] = []

    def __len__(self):
        return len(self.positions)

    def wire_attrs(self) -> dict:
        return {"positions": self.positions.copy()}

    def wire_len(self):
        return len(self)

    def load(self, start, stop):
        """(k [n, D], v [n, D]) for keys start..stop-1; 0 <= start < stop <= S, ints (numpy integers too)."""
        S = len(self)
        for name, value in (("start", start), ("stop", stop)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"load({start!r}, {stop!r}): {name} must be an int, "
                                 f"got {type(value).__name__}")
        if not 0 <= start < stop <= S:
            raise ValueError(f"load({start}, {stop}): need 0 <= start < stop <= len(kv) = {S}")
        self.loads.append((int(start), int(stop)))
        return self.k[start:stop].copy(), self.v[start:stop].copy()

    def times_loaded(self) -> np.ndarray:
        """Int [S]: how many loads covered each key."""
        count = np.zeros(len(self) + 1, dtype=np.int64)
        for start, stop in self.loads:
            count[start] += 1
            count[stop] -= 1
        return np.cumsum(count)[:-1]
