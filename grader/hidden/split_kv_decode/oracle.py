"""Slow, obviously right answers for split_kv_decode, written from the definitions alone.

Attention is computed one query row at a time over the keys that row may see (absolute
positions: 0 <= k_pos <= q_pos), in float64 with the row's max subtracted. Nothing here knows
about splits: the whole point of the exercise is that splitting changes nothing.
"""
import numpy as np

from .._oracles import attention_lse as masked_attention  # the shared (o, lse) oracle


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


def is_cover(ranges, S: int, num_splits: int) -> bool:
    """Exactly ``num_splits`` contiguous, ordered (start, stop) ranges covering 0 .. S: a valid cover,
    whatever its sizes (section 1: the sizes are a convention no correct use reads)."""
    bounds = [0] + [stop for _, stop in ranges]
    return (len(ranges) == num_splits and all(a == b for (a, _), b in zip(ranges, bounds))
            and all(a <= b for a, b in ranges) and bounds[-1] == S)


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


def merged(o, lse):
    """Parts over disjoint keys merged: each row's log-sum-exp of the parts' and their outputs weighted
    by exp(lse - that), from the largest live lse (a part with lse = -inf weighs nothing; no part live:
    a zero row and -inf)."""
    alive = lse > -np.inf
    top = np.max(np.where(alive, lse, -np.inf), axis=0)
    safe_top = np.where(np.isfinite(top), top, 0.0)
    w = np.where(alive, np.exp(np.where(alive, lse, 0.0) - safe_top), 0.0)
    total = w.sum(axis=0)
    seen = total > 0
    out = np.einsum("nt,ntd->td", w, np.where(alive[..., None], o, 0.0)) / np.where(seen, total, 1.0)[:, None]
    return out, np.where(seen, safe_top + np.log(np.where(seen, total, 1.0)), -np.inf)
