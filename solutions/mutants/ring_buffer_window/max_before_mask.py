"""Known-wrong: each row's max is taken over every key, hidden ones too; where a hidden key (a later token
of the chunk, a key past the window, a stale slot) scores far above the visible ones, their weights underflow
and the row is NaN (blind round 20: no check gave a row keys far apart)."""
import numpy as np

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _rows(x, head_dim: int, name: str) -> np.ndarray:
    """``x`` as a float array [T, head_dim], or ValueError."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != head_dim:
        raise ValueError(f"{name} must have shape [T, {head_dim}], got {list(x.shape)}")
    return x


def _positions(x, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a 1-D integer array, got {x.dtype} of shape {list(x.shape)}")
    return x.astype(np.int64)


class RingKVCache:
    """The last ``capacity`` tokens' keys and values; token p lives in slot p % capacity."""

    def __init__(self, capacity: int, head_dim: int):
        if not (_is_int(capacity) and _is_int(head_dim)) or capacity < 1 or head_dim < 1:
            raise ValueError(f"capacity and head_dim must be integers >= 1, got {capacity!r}, {head_dim!r}")
        self.capacity, self.head_dim = int(capacity), int(head_dim)
        self.keys = np.zeros((self.capacity, self.head_dim))  # [C, D]
        self.values = np.zeros((self.capacity, self.head_dim))  # [C, D]
        self.positions = np.full(self.capacity, -1, dtype=np.int64)  # [C], -1 = never written
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, k, v) -> None:
        k, v = _rows(k, self.head_dim, "k"), _rows(v, self.head_dim, "v")
        if k.shape != v.shape:
            raise ValueError(f"k and v must have the same shape, got {list(k.shape)} and {list(v.shape)}")
        new = self._length + np.arange(len(k))  # absolute positions of the new tokens  [T]
        kept = slice(max(0, len(k) - self.capacity), len(k))  # a chunk longer than the ring keeps its tail
        slots = new[kept] % self.capacity
        self.keys[slots], self.values[slots], self.positions[slots] = k[kept], v[kept], new[kept]
        self._length += len(k)


def is_stored(k):
    return k >= 0  # slot holds a token (-1 = empty)


def is_causal(q, k):
    return k <= q  # the key is the query itself or before it


def is_in_window(q, k, window):
    return k > q - window  # one of the last `window` positions, the query's own included


def window_mask(q_positions, k_positions, window: int) -> np.ndarray:
    """Bool [T, C]: query at q_positions[i] may attend to the key stored at k_positions[j]."""
    if not _is_int(window) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got {window!r}")
    window = min(int(window), np.iinfo(np.int64).max)  # longer limits nothing, and q - window fits int64
    q = _positions(q_positions, "q_positions")[:, None]  # [T, 1]
    k = _positions(k_positions, "k_positions")[None, :]  # [1, C]
    return is_stored(k) & is_causal(q, k) & is_in_window(q, k, window)  # [T, C]


def windowed_attention_step(cache: RingKVCache, q, k, v, window: int) -> np.ndarray:
    """Outputs [T, D] of the next T tokens over the last ``window`` positions each; appends them.

    The queries attend before their keys are written: the ring as it was, plus the chunk's own
    keys, so a chunk that overwrites slots its earlier queries still need loses nothing.
    """
    if not _is_int(window) or not 1 <= window <= cache.capacity:
        raise ValueError(f"window must be an integer in 1..capacity={cache.capacity}, got {window!r}")
    q, k, v = (_rows(x, cache.head_dim, name) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if not q.shape == k.shape == v.shape:
        shapes = ", ".join(str(list(x.shape)) for x in (q, k, v))
        raise ValueError(f"q, k, v must share one shape [T, head_dim], got {shapes}")
    q_pos = len(cache) + np.arange(len(q))  # absolute positions of the new tokens      [T]
    keys = np.concatenate([cache.keys, k])  # the ring before this step, then the chunk  [C + T, D]
    values = np.concatenate([cache.values, v])  # [C + T, D]
    k_pos = np.concatenate([cache.positions, q_pos])  # [C + T]
    mask = window_mask(q_pos, k_pos, window)  # every row sees itself: never empty  [T, C + T]
    scores = q @ keys.T / np.sqrt(cache.head_dim)  # [T, C + T]
    weights = np.where(mask, np.exp(scores - scores.max(axis=1, keepdims=True)), 0.0)  # max over hidden keys too
    out = (weights / weights.sum(axis=1, keepdims=True)) @ values  # [T, D]
    cache.append(k, v)
    return out
