"""Attention oracles every exercise shares: the rule on absolute positions, one row at a time.

A query at position p may see a key stored at position k when k >= 0 (the slot holds a key),
k <= p, and with a window W also k > p - W (W keys, itself included). Nothing here tiles or
vectorises across rows, so it is independent of how a submission organises its work.
"""
import numpy as np


def visible_keys(p: int, k_positions: np.ndarray, window=None) -> np.ndarray:
    """Bool [S]: which stored keys the query at position ``p`` may see."""
    k_positions = np.asarray(k_positions)
    seen = (k_positions >= 0) & (k_positions <= p)
    if window is not None:
        seen &= k_positions > p - window
    return seen


def attention_lse(q, k, v, mask):
    """(o [T, D], lse [T]) in float64 over the keys each mask row allows; a row that sees
    nothing gives o = 0 and lse = -inf."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    o, lse = np.zeros((q.shape[0], v.shape[1])), np.full(q.shape[0], -np.inf)
    for i in range(q.shape[0]):
        seen = np.flatnonzero(mask[i])
        if seen.size:
            if seen[-1] - seen[0] + 1 == seen.size:  # one run of keys: a view, the same values uncopied
                seen = slice(seen[0], seen[-1] + 1)
            s = k[seen] @ q[i] / np.sqrt(q.shape[1])
            top = s.max()
            w = np.exp(s - top)
            lse[i] = top + np.log(w.sum())
            o[i] = (w / w.sum()) @ v[seen]
    return o, lse


def attention(q, k, v, mask) -> np.ndarray:
    """Masked softmax attention [T, D]; a row that sees nothing is NaN (no answer to compare)."""
    o, lse = attention_lse(q, k, v, mask)
    o[np.isneginf(lse)] = np.nan
    return o


def ring_positions(capacity: int, written: int) -> np.ndarray:
    """Positions stored in each slot of a ring buffer after ``written`` tokens, -1 = empty.

    Token t goes to slot t % capacity, so each slot keeps the last token written there."""
    positions = np.full(capacity, -1, dtype=np.int64)
    for t in range(max(0, written - capacity), written):
        positions[t % capacity] = t
    return positions
