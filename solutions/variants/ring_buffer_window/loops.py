"""Correct, one query at a time: the visible keys are gathered in a Python loop."""
import numpy as np


def _size(x, name):
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {x!r}")
    return int(x)


def _rows(x, D, name):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != D:
        raise ValueError(f"{name} must have shape [T, {D}], got {list(x.shape)}")
    return x


class RingKVCache:
    def __init__(self, capacity, head_dim):
        self.capacity, self.head_dim = _size(capacity, "capacity"), _size(head_dim, "head_dim")
        self.keys = np.zeros((self.capacity, self.head_dim))
        self.values = np.zeros((self.capacity, self.head_dim))
        self.positions = np.full(self.capacity, -1, dtype=np.int64)
        self.length = 0

    def __len__(self):
        return self.length

    def append(self, k, v):
        k, v = _rows(k, self.head_dim, "k"), _rows(v, self.head_dim, "v")
        if k.shape != v.shape:
            raise ValueError(f"k and v must share one shape, got {list(k.shape)} and {list(v.shape)}")
        for row in range(len(k)):
            slot = self.length % self.capacity
            self.keys[slot], self.values[slot], self.positions[slot] = k[row], v[row], self.length
            self.length += 1


def window_mask(q_positions, k_positions, window):
    window = _size(window, "window")
    mask = np.zeros((len(q_positions), len(k_positions)), dtype=bool)
    for i, p in enumerate(q_positions):
        for j, key in enumerate(k_positions):
            mask[i, j] = 0 <= key <= p and int(key) > int(p) - window  # Python ints: any window
    return mask


def windowed_attention_step(cache, q, k, v, window):
    window = _size(window, "window")
    if window > cache.capacity:
        raise ValueError(f"window {window} exceeds capacity {cache.capacity}")
    q, k, v = (_rows(x, cache.head_dim, n) for x, n in ((q, "q"), (k, "k"), (v, "v")))
    if not q.shape == k.shape == v.shape:
        raise ValueError("q, k, v must share one shape [T, head_dim]")
    keys, values = list(cache.keys) + list(k), list(cache.values) + list(v)
    stored = [int(p) for p in cache.positions] + [len(cache) + t for t in range(len(q))]
    out = np.empty_like(q)
    for t in range(len(q)):
        p = len(cache) + t
        seen = [j for j, key in enumerate(stored) if 0 <= key <= p and key > p - window]
        scores = np.array([keys[j] @ q[t] for j in seen]) / np.sqrt(cache.head_dim)
        weights = np.exp(scores - scores.max())
        out[t] = (weights / weights.sum()) @ np.array([values[j] for j in seen])
    cache.append(k, v)
    return out
