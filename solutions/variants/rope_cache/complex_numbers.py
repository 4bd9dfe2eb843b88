"""A correct rope_cache written differently: each pair (x[i], x[i + D/2]) is the complex number
x[i] + 1j x[i + D/2], turned by multiplying with exp(1j theta); the cache keeps lists of steps."""
import math

import numpy as np

# Right answers everywhere, but every step joins the cache's list of steps into one array: a copy
# of the whole cache per step, which decode_step_memory sees (cache_copied_each_step, an
# efficiency mistake that caps at hire). kvgrade verify accepts that diagnosis at this level.
EXPECTED_LEVEL = "hire"


def _check_dim(D):
    if D < 2 or D % 2:
        raise ValueError(f"head dimension must be even and >= 2, got {D}")


def rope(x, positions, base=10000.0):
    x = np.asarray(x, dtype=np.float64)
    pos = np.asarray(positions)
    if x.ndim != 3:
        raise ValueError(f"x must be [T, H, D], got shape {x.shape}")
    _check_dim(x.shape[2])
    if pos.shape != (x.shape[0],) or (pos.size and pos.dtype.kind not in "iu") or (pos < 0).any():
        raise ValueError("positions must be one non-negative int per row of x")
    if not base > 1:
        raise ValueError(f"base must exceed 1, got {base}")
    half = x.shape[2] // 2
    z = x[..., :half] + 1j * x[..., half:]
    freqs = np.exp(-2.0 * np.arange(half) / x.shape[2] * math.log(base))
    turned = z * np.exp(1j * np.outer(pos, freqs))[:, None, :]
    return np.concatenate([turned.real, turned.imag], axis=-1)


class RopeKVCache:
    def __init__(self, num_heads, head_dim, base=10000.0):
        if num_heads < 1:
            raise ValueError("num_heads must be >= 1")
        _check_dim(head_dim)
        if not base > 1:
            raise ValueError("base must exceed 1")
        self.num_heads, self.head_dim, self.base = int(num_heads), int(head_dim), float(base)
        self._k, self._v = [], []

    @property
    def keys(self):
        return np.concatenate(self._k) if self._k else np.zeros((0, self.num_heads, self.head_dim))

    @property
    def values(self):
        return np.concatenate(self._v) if self._v else np.zeros((0, self.num_heads, self.head_dim))

    def __len__(self):
        return sum(len(k) for k in self._k)


def _depths(parents, T):
    parents = [int(p) for p in parents]
    if len(parents) != T:
        raise ValueError("one parent per draft")
    depth = []
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p} is neither -1 nor an earlier draft")
        depth.append(0 if p < 0 else depth[p] + 1)
    return parents, np.array(depth, dtype=np.int64)


def rope_attention_step(cache, q, k, v, parents=None):
    shape = (cache.num_heads, cache.head_dim)
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    if any(a.ndim != 3 or a.shape[1:] != shape for a in (q, k, v)) or not len(q) == len(k) == len(v):
        raise ValueError(f"q, k, v must all be [T, {shape[0]}, {shape[1]}]")
    T, n = len(q), len(cache)
    if parents is None:
        pos = n + np.arange(T)
        sees = np.tril(np.ones((T, T), dtype=bool))
    else:
        parents, depth = _depths(parents, T)
        pos = n + depth
        sees = np.eye(T, dtype=bool)
        for i, p in enumerate(parents):
            if p >= 0:
                sees[i] |= sees[p]
    if T == 0:
        return np.zeros((0, *shape))
    qr, kr = rope(q, pos, cache.base), rope(k, pos, cache.base)
    keys, values = np.concatenate([cache.keys, kr]), np.concatenate([cache.values, v])
    scores = np.einsum("thd,shd->hts", qr, keys) / math.sqrt(shape[1])
    allowed = np.concatenate([np.ones((T, n), dtype=bool), sees], axis=1)
    scores = np.where(allowed[None], scores, -np.inf)
    w = np.exp(scores - scores.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    if parents is None:
        cache._k.append(kr)
        cache._v.append(v.copy())  # its own copy: v may be the caller's array
    return np.einsum("hts,shd->thd", w, values)
