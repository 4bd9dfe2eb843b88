"""Slow, obviously right specs for ring_buffer_window, written from the rule on absolute positions.

Window W means W keys: a query at position p sees the keys at positions p - W + 1 .. p.
"""
import numpy as np

from .._oracles import attention as masked_attention  # noqa: F401  (shared; a row that sees nothing is NaN)


def window_mask(q_positions, k_positions, window: int) -> np.ndarray:
    """Query i may see key j when key j holds a token at most window - 1 positions before it."""
    mask = np.zeros((len(q_positions), len(k_positions)), dtype=bool)
    for i, p in enumerate(q_positions):
        for j, k in enumerate(k_positions):
            mask[i, j] = k >= 0 and 0 <= p - k < window
    return mask


def _softmax_average(q_row, keys, values):
    scores = keys @ q_row / np.sqrt(q_row.shape[0])
    weights = np.exp(scores - scores.max())
    return (weights / weights.sum()) @ values


def sliding_window_attention(q, k, v, window: int) -> np.ndarray:
    """Every token of a whole sequence [N, D] over its last ``window`` positions, itself included."""
    out = np.empty((q.shape[0], v.shape[1]))
    for p in range(q.shape[0]):
        first = max(0, p - window + 1)
        out[p] = _softmax_average(q[p], k[first:p + 1], v[first:p + 1])
    return out


class Ring:
    """What a ring-buffer cache must hold, written one token at a time into slot p % capacity."""

    def __init__(self, capacity: int, head_dim: int):
        self.capacity = capacity
        self.keys = np.zeros((capacity, head_dim))
        self.values = np.zeros((capacity, head_dim))
        self.positions = np.full(capacity, -1, dtype=np.int64)
        self.length = 0

    def append(self, k, v):
        for row in range(k.shape[0]):
            slot = self.length % self.capacity
            self.keys[slot], self.values[slot], self.positions[slot] = k[row], v[row], self.length
            self.length += 1
