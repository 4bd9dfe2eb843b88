"""Known wrong: a correct cache and step, but nothing is validated: a window larger than the
ring, mismatched shapes or a zero capacity give silent answers (or other errors)."""
import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_arguments"


class RingKVCache:
    def __init__(self, capacity, head_dim):
        self.capacity, self.head_dim = capacity, head_dim
        self.keys = np.zeros((max(capacity, 0), max(head_dim, 0)))
        self.values = np.zeros((max(capacity, 0), max(head_dim, 0)))
        self.positions = np.full(max(capacity, 0), -1, dtype=np.int64)
        self._length = 0

    def __len__(self):
        return self._length

    def append(self, k, v):
        for row in range(len(k)):
            slot = self._length % self.capacity
            self.keys[slot], self.values[slot], self.positions[slot] = k[row], v[row], self._length
            self._length += 1


def window_mask(q_positions, k_positions, window):
    q, k = np.asarray(q_positions)[:, None], np.asarray(k_positions)[None, :]
    return (k >= 0) & (k <= q) & (k > q - window)


def windowed_attention_step(cache, q, k, v, window):
    q_pos = len(cache) + np.arange(len(q))
    keys, values = np.concatenate([cache.keys, k]), np.concatenate([cache.values, v])
    mask = window_mask(q_pos, np.concatenate([cache.positions, q_pos]), window)
    scores = np.where(mask, q @ keys.T / np.sqrt(q.shape[1]), -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    out = (weights / weights.sum(axis=1, keepdims=True)) @ values
    cache.append(k, v)
    return out
