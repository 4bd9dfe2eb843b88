"""An in-memory KVSource for your own tests: it serves K and V and records every load.

The grader lends your kernel a source with the same interface (``len``, ``positions``,
``load``) that lives in another process and counts the keys you read.
"""
import numpy as np


class KVSource:
    """S keys and values with the position stored in each slot (-1 = empty)."""

    def __init__(self, k: np.ndarray, v: np.ndarray, positions=None):
        if k.ndim != 2 or v.shape != k.shape:
            raise ValueError(f"need k and v of the same shape [S, D], got {k.shape} and {v.shape}")
        self.k, self.v = k, v
        self.positions = (np.arange(len(k)) if positions is None else np.asarray(positions)).astype(np.int64)
        if self.positions.shape != (len(k),):
            raise ValueError(f"need one position per key, got {self.positions.shape} for {len(k)} keys")
        self.loads: list[tuple[int, int]] = []  # every (start, stop) asked for, in order

    def __len__(self) -> int:
        return len(self.positions)

    def load(self, start: int, stop: int):
        """(k [n, D], v [n, D]) for keys start .. stop - 1; needs ints 0 <= start < stop <= S."""
        for value in (start, stop):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"load({start!r}, {stop!r}): start and stop must be ints")
        if not 0 <= start < stop <= len(self):
            raise ValueError(f"load({start}, {stop}): need 0 <= start < stop <= {len(self)}")
        self.loads.append((int(start), int(stop)))
        return self.k[start:stop].copy(), self.v[start:stop].copy()

    def loaded_keys(self) -> list[int]:
        """Indices of every key read at least once, in increasing order."""
        return sorted({j for start, stop in self.loads for j in range(start, stop)})
