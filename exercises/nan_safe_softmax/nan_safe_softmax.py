"""nan_safe_softmax: masked softmax and the online-softmax state of a tiled kernel (see README.md).

A state is a tuple (m [T], l [T], o [T, D]): m the largest scaled score seen so far (-inf when
nothing was seen), l the sum of exp(s - m), o the sum of exp(s - m) * v, not normalised.
"""
import numpy as np


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of scores [..., S], using only the entries where the bool
    mask [..., S] is True. Masked entries get 0; a row with nothing allowed is all zeros.
    Returns an array of the shape and dtype of scores. Mismatched shapes raise ValueError.
    """
    raise NotImplementedError


def partial_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray):
    """The state (m [T], l [T], o [T, D]) of queries q [T, D] over one chunk of n keys
    k [n, D] with values v [n, D], where the bool mask [T, n] says which keys each query may
    see. Scores are q k^T / sqrt(D). n may be 0. Mismatched shapes raise ValueError.
    """
    raise NotImplementedError


def merge_partials(a, b):
    """The state of the union of two disjoint chunks, from their states a and b (each
    (m, l, o)). The empty state (-inf, 0, 0) changes nothing."""
    raise NotImplementedError


def finalize(state) -> np.ndarray:
    """Attention output [T, D] from a state: o / l, and zeros for rows that saw nothing."""
    raise NotImplementedError
