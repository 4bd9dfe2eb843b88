"""split_kv_decode: flash-decoding (split-KV) and cascade attention from normalised parts (see README.md).

A part is (o [T, D], lse [T]): o the attention output over one set of keys, lse the natural-log
log-sum-exp of the scaled scores; a row that saw no key has o = 0 and lse = -inf.
"""
import numpy as np


def attention_with_lse(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray):
    """(o [T, D], lse [T]) of queries q [T, D] over keys k [n, D] and values v [n, D], where the bool
    mask [T, n] says which keys each query may see. Scores are q k^T / sqrt(D). n may be 0."""
    raise NotImplementedError


def merge_states(o: np.ndarray, lse: np.ndarray):
    """(o [T, D], lse [T]) over the union of N disjoint key sets, from their parts o [N, T, D] and
    lse [N, T]: the same as attending over all those keys at once."""
    raise NotImplementedError


def split_ranges(S: int, num_splits: int) -> list:
    """num_splits contiguous (start, stop) ranges covering 0 .. S in order, sizes differing by at
    most one, longer ones first (the last ones are empty when num_splits > S)."""
    raise NotImplementedError


def split_kv_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, q_positions, k_positions,
                       num_splits: int):
    """(o [T, D], lse [T]): attention of q [T, D] over k, v [S, D] by absolute positions
    (k_positions < 0 are empty slots), computed on each of split_ranges(S, num_splits) and merged."""
    raise NotImplementedError


def shared_prefix_attention(q: np.ndarray, prefix_k: np.ndarray, prefix_v: np.ndarray,
                            suffix_k: np.ndarray, suffix_v: np.ndarray) -> np.ndarray:
    """[B, T, D]: attention of each sequence's last T tokens q [B, T, D] over the shared prefix
    (prefix_k, prefix_v [P, D]) and its own tokens (suffix_k, suffix_v [B, L, D]), causally."""
    raise NotImplementedError
