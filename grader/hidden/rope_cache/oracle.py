"""The slow, obviously right answers for rope_cache, written from absolute positions.

Nothing here knows about caches or steps: every token is rotated at its place in the whole
sequence, one pair of dimensions at a time, and attention is dense over what each query sees.
"""
import math

import numpy as np

from grader import checking


def tolerance(inputs, angle: float, scale: float, m: float = 1.0) -> float:
    """Section 1's precision rule for RoPE: the float inputs' own rounding (``checking.tolerance``,
    scores up to ``m``, values up to ``scale``), plus a float64 rounding of the largest angle.
    Positions are exact integers, so the careful angle is a float64 one: its rounding grows with
    the position (1e-11 at 1e5); a float32 angle misses by about 5e-3 there, which no input justifies."""
    return checking.tolerance(inputs, m, scale) + checking.tolerance((), float(angle) * max(1.0, m), scale)


def rotate(x, positions, base: float) -> np.ndarray:
    """x [T, H, D] where dimensions i and i + D/2 of row t turn by positions[t] * base ** (-2 i / D)."""
    x = np.asarray(x, np.float64)
    D = x.shape[-1]
    half = D // 2
    p = np.asarray(positions, np.float64)[:, None]  # [T, 1]: one angle per row, the same for every head
    out = np.empty_like(x)
    for i in range(half):
        theta = p * base ** (-2.0 * i / D)
        a, b = x[:, :, i], x[:, :, i + half]
        out[:, :, i] = a * np.cos(theta) - b * np.sin(theta)
        out[:, :, i + half] = b * np.cos(theta) + a * np.sin(theta)
    return out


def attention(q, k, v, visible) -> np.ndarray:
    """[T, H, D]: per head, softmax of q . k / sqrt(D) over the keys ``visible`` [T, S] allows."""
    T, H, D = q.shape
    out = np.zeros((T, H, D))
    for t in range(T):
        seen = np.flatnonzero(visible[t])
        for h in range(H):
            scores = k[seen, h] @ q[t, h] / math.sqrt(D)
            w = np.exp(scores - scores.max())
            out[t, h] = w @ v[seen, h] / w.sum()
    return out


def sequence_attention(q, k, v, base: float, rows) -> np.ndarray:
    """[len(rows), H, D]: RoPE attention over the whole sequence q, k, v [N, H, D] from scratch
    (token n at position n, causal), for the query rows asked for."""
    rows = np.asarray(rows, np.int64)
    last = int(rows.max()) + 1 if rows.size else 0
    keys = rotate(k[:last], np.arange(last), base)
    visible = np.arange(last)[None, :] <= rows[:, None]
    return attention(rotate(q[rows], rows, base), keys, v[:last], visible)


def branch(parents, i: int) -> list[int]:
    """The drafts from i's root down to i, in order."""
    path = [i]
    while parents[path[-1]] >= 0:
        path.append(int(parents[path[-1]]))
    return path[::-1]


def tree_attention(prefix_k, prefix_v, q, k, v, parents, base: float) -> np.ndarray:
    """[T, H, D]: each draft's output is that of the last token of the sequence made of the
    cached prefix followed by the draft's own branch, computed from scratch. A chain's branches
    are its prefixes: one pass over the whole sequence answers every draft (thousands deep)."""
    if list(parents) == list(range(-1, len(q) - 1)):
        P = len(prefix_k)
        return sequence_attention(np.concatenate([np.zeros_like(prefix_k), q]), np.concatenate([prefix_k, k]),
                                  np.concatenate([prefix_v, v]), base, P + np.arange(len(q)))
    out = np.zeros(q.shape)
    for i in range(len(q)):
        path = branch(parents, i)
        seq_k = np.concatenate([prefix_k, k[path]])
        seq_v = np.concatenate([prefix_v, v[path]])
        seq_q = np.concatenate([np.zeros_like(prefix_k), q[path]])  # only the last query is asked for
        out[i] = sequence_attention(seq_q, seq_k, seq_v, base, [len(seq_k) - 1])[0]
    return out
