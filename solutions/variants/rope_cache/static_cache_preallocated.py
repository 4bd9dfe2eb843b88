"""Correct: the cache is preallocated for 4,096 positions, written (np.full) like Hugging Face's static
cache, and grows by doubling past that; every step reads the keys where they lie. What a cache holds is its
storage, however large: red team 22 had decode_step_memory count it as a per-step copy (hire)."""
import math
import operator
from typing import Sequence

import numpy as np

EXPECTED_LEVEL = "strong_hire"


def _size(name: str, n) -> int:
    try:
        n = operator.index(n)
    except TypeError:
        raise ValueError(f"{name} must be an int, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")
    return n


def _head_dim(D) -> int:
    D = _size("head_dim", D)
    if D % 2:
        raise ValueError(f"head_dim must be even (pairs i, i + D/2), got {D}")
    return D


def _base(base) -> float:
    if not isinstance(base, (int, float, np.integer, np.floating)) or not base > 1:
        raise ValueError(f"base must be a number > 1, got {base!r}")
    return float(base)


def _positions(positions, T: int) -> np.ndarray:
    p = np.asarray(positions)
    if p.shape != (T,) or (p.size and p.dtype.kind not in "iu"):
        raise ValueError(f"positions must be {T} ints, got {p.dtype} of shape {p.shape}")
    if (p < 0).any():
        raise ValueError(f"positions must be >= 0, got {int(p.min())}")
    return p.astype(np.int64)


def _tokens(name: str, x, H: int | None = None, D: int | None = None) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 3 or x.dtype.kind != "f":
        raise ValueError(f"{name} must be a float array [T, H, D], got {x.dtype} of shape {x.shape}")
    if (H is not None and x.shape[1] != H) or (D is not None and x.shape[2] != D):
        raise ValueError(f"{name} has shape {x.shape}; the cache holds {H} heads of dimension {D}")
    return x.astype(np.float64, copy=False)


def _rotate(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """x [T, H, D] turned pair by pair at each row's position (arguments already checked)."""
    half = x.shape[-1] // 2
    freq = base ** (-2.0 * np.arange(half) / x.shape[-1])  # [D/2]
    angle = positions[:, None, None] * freq  # [T, 1, D/2]
    cos, sin = np.cos(angle), np.sin(angle)
    x1, x2 = x[..., :half], x[..., half:]  # [T, H, D/2] each
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)  # [T, H, D]


def rope(x: np.ndarray, positions, base: float = 10000.0) -> np.ndarray:
    """x [T, H, D] rotated at its rows' absolute positions [T] (any order), rotate-half pairs."""
    x = _tokens("x", x)
    T, _, D = x.shape
    _head_dim(D)
    return _rotate(x, _positions(positions, T), _base(base))


class RopeKVCache:
    """Keys (rotated at their positions) and values of every token so far; grows by doubling."""

    def __init__(self, num_heads: int, head_dim: int, base: float = 10000.0):
        self.num_heads, self.head_dim = _size("num_heads", num_heads), _head_dim(head_dim)
        self.base = _base(base)
        # preallocated like a static cache (4096 positions), grown by doubling past it
        self._keys = np.full((4096, self.num_heads, self.head_dim), 0.0)  # [capacity, H, D]
        self._values = np.full_like(self._keys, 0.0)
        self._length = 0

    @property
    def keys(self) -> np.ndarray:  # [len, H, D]
        return self._keys[:self._length]

    @property
    def values(self) -> np.ndarray:  # [len, H, D]
        return self._values[:self._length]

    def __len__(self) -> int:
        return self._length

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        """Store already-rotated keys k and values v [T, H, D] after the cached ones."""
        end = self._length + len(k)
        if end > len(self._keys):
            grown = max(end, 2 * len(self._keys))
            self._keys = np.concatenate([self.keys, np.zeros((grown - self._length, *k.shape[1:]))])
            self._values = np.concatenate([self.values, np.zeros((grown - self._length, *v.shape[1:]))])
        self._keys[self._length:end], self._values[self._length:end] = k, v
        self._length = end


def _parents(parents, T: int) -> np.ndarray:
    a = np.asarray(parents)
    if a.shape != (T,) or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"parents must be {T} ints (one per token), got {a.dtype} of shape {a.shape}")
    a = a.astype(np.int64)
    bad = (a < -1) | (a >= np.arange(T))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"parents[{i}] = {a[i]}: must be -1 or an earlier draft's index")
    return a


def _ancestry(parents: np.ndarray) -> np.ndarray:
    """[T, T] bool: row i marks i and its ancestors (parents come before children)."""
    on_path = np.eye(len(parents), dtype=bool)
    for i, p in enumerate(parents):
        if p >= 0:
            on_path[i] |= on_path[p]
    return on_path


def rope_attention_step(cache: RopeKVCache, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        parents: Sequence[int] | None = None) -> np.ndarray:
    """[T, H, D]: the next T tokens (or T draft tokens, with ``parents``) attend over the cache."""
    H, D = cache.num_heads, cache.head_dim
    q, k, v = (_tokens(name, x, H, D) for name, x in (("q", q), ("k", k), ("v", v)))
    T = len(q)
    if len(k) != T or len(v) != T:
        raise ValueError(f"q, k and v must hold the same tokens, got {len(q)}, {len(k)} and {len(v)}")
    S = len(cache)
    if parents is None:
        own = np.tril(np.ones((T, T), dtype=bool))  # token i sees tokens 0..i of the step
        positions = S + np.arange(T)  # [T]
    else:
        own = _ancestry(_parents(parents, T))  # [T, T]
        positions = S + own.sum(axis=1) - 1  # one past the parent: the cache's end plus depth
    out = np.zeros((T, H, D))
    if T == 0:
        return out
    q_rot, k_rot = _rotate(q, positions, cache.base), _rotate(k, positions, cache.base)  # [T, H, D]
    for h in range(H):  # the cached keys are read where they lie, never copied or turned again
        cached = q_rot[:, h] @ cache.keys[:, h].T  # every cached key precedes every new token  [T, S]
        new = np.where(own, q_rot[:, h] @ k_rot[:, h].T, -np.inf)  # [T, T]
        scores = np.concatenate([cached, new], axis=1) / math.sqrt(D)  # [T, S + T]
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        mixed = weights[:, :S] @ cache.values[:, h] + weights[:, S:] @ v[:, h]  # [T, D]
        out[:, h] = mixed / weights.sum(axis=1, keepdims=True)
    if parents is None:
        cache.append(k_rot, v)
    return out
