"""ring_buffer_window: a ring-buffer KV cache and sliding-window attention (see README.md)."""
import numpy as np


class RingKVCache:
    """Keys and values of the last ``capacity`` tokens; token p lives in slot p % capacity.

    Attributes (numpy arrays, updated in place or replaced, your choice):
        keys:      float64 [capacity, head_dim]
        values:    float64 [capacity, head_dim]
        positions: int64 [capacity], the absolute position stored in each slot, -1 = empty
    Raises ValueError unless capacity >= 1 and head_dim >= 1.
    """

    def __init__(self, capacity: int, head_dim: int):
        raise NotImplementedError

    def __len__(self) -> int:
        """Tokens appended so far, which is also the position of the next token."""
        raise NotImplementedError

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        """Write T tokens, k and v [T, head_dim], at positions len(self) .. len(self) + T - 1.

        Each goes to slot (position % capacity); a chunk longer than the ring leaves its last
        ``capacity`` tokens. Raises ValueError on shapes other than [T, head_dim] for both.
        """
        raise NotImplementedError


def window_mask(q_positions: np.ndarray, k_positions: np.ndarray, window: int) -> np.ndarray:
    """Bool [T, C]: True where the query at q_positions[i] may attend to the key at k_positions[j].

    Positions are absolute and in any order; -1 marks an empty slot, never visible. A query at
    position p sees key position k exactly when k <= p and k > p - window (window keys, the
    query itself included). Raises ValueError unless window >= 1.
    """
    raise NotImplementedError


def windowed_attention_step(cache: RingKVCache, q: np.ndarray, k: np.ndarray, v: np.ndarray,
                            window: int) -> np.ndarray:
    """Attention outputs, float64 [T, D], of the next T tokens, which are also appended to ``cache``.

    The tokens continue the sequence in the cache; each attends to the keys of its last
    ``window`` positions, itself included, with scores scaled by 1/sqrt(D). Raises
    ValueError unless 1 <= window <= capacity and q, k, v are all [T, head_dim]; a rejected
    call leaves the cache unchanged.
    """
    raise NotImplementedError
