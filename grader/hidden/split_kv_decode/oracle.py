"""Slow, obviously right answers for split_kv_decode, written from the definitions alone.

Attention is computed one query row at a time over the keys that row may see (absolute
positions: 0 <= k_pos <= q_pos), in float64 with the row's max subtracted. Nothing here knows
about splits: the whole point of the exercise is that splitting changes nothing.
"""
import math

import numpy as np


def attention_row(q_row, k, v, visible):
    """(o [D], lse) of one query over the keys where ``visible`` [n] holds; (0, -inf) for none."""
    keys = np.flatnonzero(visible)
    if keys.size == 0:
        return np.zeros(v.shape[1]), -math.inf
    s = k[keys].astype(np.float64) @ q_row.astype(np.float64) / math.sqrt(len(q_row))  # [n_visible]
    top = s.max()
    w = np.exp(s - top)
    return w @ v[keys].astype(np.float64) / w.sum(), top + math.log(w.sum())


def masked_attention(q, k, v, mask):
    """(o [T, D], lse [T]) of q [T, D] over k, v [n, D] where mask [T, n] allows."""
    rows = [attention_row(q[i], k, v, mask[i]) for i in range(len(q))]
    o = np.array([r[0] for r in rows]).reshape(len(q), v.shape[1])
    return o, np.array([r[1] for r in rows], dtype=np.float64)


def visible(q_positions, k_positions):
    """[T, S] bool: key j is visible to query i when 0 <= k_pos[j] <= q_pos[i]."""
    q_pos, k_pos = np.asarray(q_positions, np.int64), np.asarray(k_positions, np.int64)
    return (k_pos[None, :] >= 0) & (k_pos[None, :] <= q_pos[:, None])


def positional_attention(q, k, v, q_positions, k_positions):
    """Attention over all keys at once, with the position rule."""
    return masked_attention(q, k, v, visible(q_positions, k_positions))


def ranges(S: int, num_splits: int) -> list[tuple[int, int]]:
    """Range i holds as many keys as there are j in 0 .. S-1 with j % num_splits == i (so sizes
    differ by at most one and the longer come first), laid end to end from 0."""
    sizes = [len(range(i, S, num_splits)) for i in range(num_splits)]
    bounds = [0]
    for size in sizes:
        bounds.append(bounds[-1] + size)
    return list(zip(bounds[:-1], bounds[1:]))


def sequence_positions(P: int, L: int, T: int):
    """Absolute positions of one sequence of a shared-prefix batch: prefix keys 0 .. P-1, its suffix
    keys P .. P+L-1, and its T queries, which are the suffix's last T tokens."""
    keys = np.arange(P + L)
    return keys[P + L - T:], keys


def shared_prefix(q, prefix_k, prefix_v, suffix_k, suffix_v):
    """[B, T, D]: each sequence's dense attention over the prefix followed by its own suffix."""
    B, T, _ = q.shape
    P, L = len(prefix_k), suffix_k.shape[1]
    q_pos, k_pos = sequence_positions(P, L, T)
    out = [positional_attention(q[b], np.concatenate([prefix_k, suffix_k[b]]),
                                np.concatenate([prefix_v, suffix_v[b]]), q_pos, k_pos)[0] for b in range(B)]
    return np.stack(out)
