"""A correct rope_cache written with loops: one pair of dimensions at a time, one query at a time,
a cache that grows one token per list entry."""
import math

import numpy as np

# Right answers everywhere, but every step rebuilds the key and value arrays from the cache's list
# of rows: a copy of the whole cache per step, which decode_step_memory sees (cache_copied_each_step, an
# efficiency mistake that caps at hire). kvgrade verify accepts that diagnosis at this level.
EXPECTED_LEVEL = "hire"


def _turn(vec, p, base):
    """One head's vector [D] rotated at position p, pair by pair."""
    D = len(vec)
    out = np.empty(D)
    for i in range(D // 2):
        angle = p / base ** (2 * i / D)
        c, s = math.cos(angle), math.sin(angle)
        out[i] = vec[i] * c - vec[i + D // 2] * s
        out[i + D // 2] = vec[i + D // 2] * c + vec[i] * s
    return out


def rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=np.float64)
    positions = list(positions)
    if x.ndim != 3 or x.shape[2] % 2 or len(positions) != len(x):
        raise ValueError("x must be [T, H, D] with D even, and one position per row")
    if base <= 1 or any(int(p) != p or p < 0 for p in positions):
        raise ValueError("positions must be ints >= 0 and base > 1")
    return np.array([[_turn(x[t, h], int(positions[t]), base) for h in range(x.shape[1])]
                     for t in range(len(x))]).reshape(x.shape)


class RopeKVCache:
    def __init__(self, num_heads, head_dim, base=10000.0):
        if num_heads < 1 or head_dim < 2 or head_dim % 2 or base <= 1:
            raise ValueError("need num_heads >= 1, an even head_dim >= 2 and base > 1")
        self.num_heads, self.head_dim, self.base = num_heads, head_dim, base
        self.key_rows, self.value_rows = [], []

    def __len__(self):
        return len(self.key_rows)

    @property
    def keys(self):
        return np.array(self.key_rows).reshape(len(self), self.num_heads, self.head_dim)

    @property
    def values(self):
        return np.array(self.value_rows).reshape(len(self), self.num_heads, self.head_dim)


def rope_attention_step(cache, q, k, v, parents=None):
    H, D = cache.num_heads, cache.head_dim
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    for a in (q, k, v):
        if a.ndim != 3 or a.shape[1:] != (H, D) or len(a) != len(q):
            raise ValueError(f"q, k and v must be [T, {H}, {D}] with the same T")
    T, n = len(q), len(cache)
    chain = [i - 1 for i in range(T)] if parents is None else [int(p) for p in parents]
    if len(chain) != T or any(not -1 <= p < i for i, p in enumerate(chain)):
        raise ValueError("each parent must be -1 or an earlier draft, one per draft")
    depth = []
    for p in chain:
        depth.append(0 if p < 0 else depth[p] + 1)
    new_k = [np.array([_turn(k[i, h], n + depth[i], cache.base) for h in range(H)]) for i in range(T)]
    out = np.zeros((T, H, D))
    old_keys, old_values = cache.keys, cache.values
    for i in range(T):
        mine = [i]
        while chain[mine[-1]] >= 0:
            mine.append(chain[mine[-1]])
        for h in range(H):
            qi = _turn(q[i, h], n + depth[i], cache.base)
            ks = np.concatenate([old_keys[:, h], [new_k[j][h] for j in mine]])
            vs = np.concatenate([old_values[:, h], [v[j, h] for j in mine]])
            s = ks @ qi / math.sqrt(D)
            w = np.exp(s - s.max())
            out[i, h] = w @ vs / w.sum()
    if parents is None:
        cache.key_rows += new_k
        cache.value_rows += [v[i].copy() for i in range(T)]  # its own copy: v may be the caller's array
    return out
