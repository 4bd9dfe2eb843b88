"""Correct, written differently: the cache reserves twice what it needs whenever it grows, and a
step builds its [T, S] scores per head with a few temporaries. From a blind set written from the
contract alone: at some seeds the kit called it wasteful (cache_copied_each_step), because with
D = 34 a handful of score temporaries of a T = 5 step outgrew half a copy of the keys."""
EXPECTED_LEVEL = "strong_hire"

import operator
from typing import Sequence

import numpy as np


def _size(value, name: str) -> int:
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None
    if n < 1:
        raise ValueError(f"{name} must be at least 1, got {n}")
    return n


def _check_base(base) -> float:
    try:
        b = float(base)
    except (TypeError, ValueError):
        raise ValueError(f"base must be a number > 1, got {base!r}") from None
    if not b > 1.0:  # also rejects NaN
        raise ValueError(f"base must be > 1, got {base!r}")
    return b


def _int_vector(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        if arr.dtype == object:
            try:
                return np.array([operator.index(v) for v in arr], dtype=np.int64)
            except (TypeError, OverflowError):
                pass
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def _float_array(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" or arr.dtype.kind == "f" and arr.dtype.itemsize < 4:
        raise ValueError(f"{name} must be a float array, got dtype {arr.dtype}")
    if arr.ndim != 3:
        raise ValueError(f"{name} must have shape [T, H, D], got {arr.shape}")
    return arr


def _angles(positions: np.ndarray, D: int, base: float) -> np.ndarray:
    """theta [T, D/2] = p * base ** (-2 i / D), in float64 from the integer positions."""
    i = np.arange(D // 2, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / D)
    return positions.astype(np.float64)[:, None] * inv_freq[None, :]


def _rotate(x: np.ndarray, positions: np.ndarray, base: float) -> np.ndarray:
    """float64 rotate-half of x [T, H, D]; arguments already checked."""
    D = x.shape[-1]
    half = D // 2
    theta = _angles(positions, D, base)
    cos, sin = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]  # [T, 1, D/2]
    x = x.astype(np.float64, copy=False)
    x1, x2 = x[..., :half], x[..., half:]
    out = np.empty(x.shape, dtype=np.float64)
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:] = x2 * cos + x1 * sin
    return out


def rope(x: np.ndarray, positions, base: float = 10000.0) -> np.ndarray:
    """x [T, H, D] with row t rotated at positions[t] (rotate-half pairs (i, i + D/2), angle
    theta_i = p * base ** (-2 i / D)); returns [T, H, D]. Positions are >= 0, in any order."""
    x = _float_array(x, "x")
    D = x.shape[-1]
    if D % 2 or D == 0:
        raise ValueError(f"the head dimension must be even and >= 2, got {D}")
    pos = _int_vector(positions, "positions")
    if pos.shape[0] != x.shape[0]:
        raise ValueError(f"{pos.shape[0]} positions for {x.shape[0]} rows of x")
    if pos.size and pos.min() < 0:
        raise ValueError(f"positions must be >= 0, got {int(pos.min())}")
    b = _check_base(base)
    return _rotate(x, pos, b)


class RopeKVCache:
    """The keys and values of every token decoded so far, keys stored already rotated.

    Attributes: ``keys`` and ``values`` [len, H, D] (may be properties), ``base``.
    """

    def __init__(self, num_heads: int, head_dim: int, base: float = 10000.0):
        H = _size(num_heads, "num_heads")
        D = _size(head_dim, "head_dim")
        if D % 2:
            raise ValueError(f"head_dim must be even, got {D}")
        self.base = _check_base(base)
        self.num_heads, self.head_dim = H, D
        self._len = 0
        self._k = np.zeros((0, H, D))
        self._v = np.zeros((0, H, D))

    def __len__(self) -> int:
        return self._len

    @property
    def keys(self) -> np.ndarray:
        return self._k[: self._len]

    @property
    def values(self) -> np.ndarray:
        return self._v[: self._len]

    def _reserve(self, needed: int) -> None:
        """Room for `needed` tokens; grows geometrically so appends are amortised O(T)."""
        if needed <= self._k.shape[0]:
            return
        cap = max(2 * needed, 16)
        for name in ("_k", "_v"):
            old = getattr(self, name)
            new = np.zeros((cap,) + old.shape[1:])
            new[: self._len] = old[: self._len]
            setattr(self, name, new)


def _tree_depths(parents, T: int) -> np.ndarray:
    par = _int_vector(parents, "parents")
    if par.shape[0] != T:
        raise ValueError(f"{par.shape[0]} parents for {T} draft tokens")
    depth = np.zeros(T, dtype=np.int64)
    for i, p in enumerate(par.tolist()):
        if p == -1:
            depth[i] = 0
        elif 0 <= p < i:
            depth[i] = depth[p] + 1
        else:
            raise ValueError(f"parents[{i}] = {p}: must be -1 or an earlier draft index in [0, {i})")
    return par, depth


def _attend(q, K_cache, V_cache, k_new, v_new, visible_new, scale):
    """q [T, H, D] against every cached key plus the new keys where visible_new [T, T] allows."""
    s_cache = np.einsum("thd,shd->hts", q, K_cache) * scale  # [H, T, L]
    s_new = np.einsum("thd,shd->hts", q, k_new) * scale  # [H, T, T]
    s_new = np.where(visible_new[None], s_new, -np.inf)
    m = s_new.max(axis=-1)  # finite: every token sees itself
    if s_cache.shape[-1]:
        m = np.maximum(m, s_cache.max(axis=-1))
    e_cache = np.exp(s_cache - m[..., None])
    e_new = np.exp(s_new - m[..., None])
    denom = e_cache.sum(axis=-1) + e_new.sum(axis=-1)  # [H, T]
    o = np.einsum("hts,shd->thd", e_cache, V_cache) + np.einsum("hts,shd->thd", e_new, v_new)
    return o / denom.T[..., None]


def rope_attention_step(cache: RopeKVCache, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                        parents: Sequence[int] | None = None) -> np.ndarray:
    """[T, H, D]: attention outputs of T new tokens, given their unrotated projections q, k, v
    [T, H, D]. Without ``parents`` they are the sequence's next tokens and are appended to the
    cache; with ``parents`` they are draft tokens of a tree and nothing is stored."""
    if not isinstance(cache, RopeKVCache):
        raise ValueError("cache must be a RopeKVCache")
    q, k, v = _float_array(q, "q"), _float_array(k, "k"), _float_array(v, "v")
    H, D = cache.num_heads, cache.head_dim
    T = q.shape[0]
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.shape != (T, H, D):
            raise ValueError(f"{name} has shape {a.shape}; expected {(T, H, D)} for this cache")
    if parents is not None:
        par, depth = _tree_depths(parents, T)
    L = len(cache)
    if T == 0:
        return np.zeros((0, H, D))
    scale = 1.0 / np.sqrt(D)
    v64 = v.astype(np.float64, copy=False)

    if parents is None:
        pos = L + np.arange(T, dtype=np.int64)
        qr, kr = _rotate(q, pos, cache.base), _rotate(k, pos, cache.base)
        visible = np.tri(T, dtype=bool)  # the cache in full, then causal within the step
        out = _attend(qr, cache.keys, cache.values, kr, v64, visible, scale)
        cache._reserve(L + T)
        cache._k[L:L + T] = kr
        cache._v[L:L + T] = v64
        cache._len = L + T
        return out

    pos = L + depth
    qr, kr = _rotate(q, pos, cache.base), _rotate(k, pos, cache.base)
    anc = np.eye(T, dtype=bool)  # ancestor-or-self
    for i, p in enumerate(par.tolist()):
        if p >= 0:
            anc[i] |= anc[p]
    return _attend(qr, cache.keys, cache.values, kr, v64, anc, scale)
