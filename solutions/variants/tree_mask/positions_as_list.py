"""Correct values in the wrong container: positions as a Python list of ints (the mask is an
array). A container slip (CONTRACT section 1): hire, and the values are still judged."""
import numpy as np

EXPECTED_LEVEL = "hire"


def _parents(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    out = []
    for i, p in enumerate(parents):
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)) or not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p!r}: must be -1 or an index below {i}")
        out.append(int(p))
    return out


def _depths(parents):
    depth = []
    for p in parents:  # topological order: a parent's depth is known before its children's
        depth.append(0 if p < 0 else depth[p] + 1)
    return depth


def tree_positions(parents, P):
    parents = _parents(parents, P)
    return [int(P) + d for d in _depths(parents)]


def tree_attention_mask(parents, P):
    parents = _parents(parents, P)
    T = len(parents)
    mask = np.zeros((T, int(P) + T), dtype=bool)
    mask[:, :int(P)] = True
    for i in range(T):
        j = i
        while j >= 0:
            mask[i, int(P) + j] = True
            j = parents[j]
    return mask
