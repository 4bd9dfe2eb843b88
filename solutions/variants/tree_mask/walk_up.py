"""Correct, written by walking up the parents of each draft, with plain Python lists."""
import numpy as np


def _check(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    if any(isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)) for p in parents):
        raise ValueError(f"parents must be ints, got {list(parents)[:8]}")
    parents = [int(p) for p in parents]
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p}: must be -1 or an earlier index")
    return parents


def _path(parents, i):
    path = []
    while i != -1:
        path.append(i)
        i = parents[i]
    return path


def tree_positions(parents, P):
    parents = _check(parents, P)
    return np.array([int(P) + len(_path(parents, i)) - 1 for i in range(len(parents))], dtype=np.int64)


def tree_attention_mask(parents, P):
    parents = _check(parents, P)
    T, P = len(parents), int(P)
    mask = np.zeros((T, P + T), dtype=bool)
    mask[:, :P] = True
    for i in range(T):
        mask[i, [P + j for j in _path(parents, i)]] = True
    return mask
