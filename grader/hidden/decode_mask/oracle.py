"""Slow, obviously right specs for decode_mask, written from the rule on absolute positions."""
import numpy as np

from .._oracles import attention  # shared: masked softmax, one row at a time


def causal_mask(T: int, S: int) -> np.ndarray:
    """Row i is the token at position S - T + i; it may see every key at a position <= its own."""
    mask = np.zeros((T, S), dtype=bool)
    for i in range(T):
        position = S - T + i
        mask[i, : position + 1] = True
    return mask


def full_sequence_attention(q, k, v):
    """Causal attention of every one of S tokens over its own past: prefill of the whole sequence."""
    return attention(q, k, v, causal_mask(q.shape[0], q.shape[0]))
