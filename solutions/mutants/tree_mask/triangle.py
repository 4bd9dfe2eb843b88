"""Known wrong: the drafts see each other through a causal triangle, as if the tree were a chain."""
import numpy as np

EXPECTED_DIAGNOSIS = "triangle_tree_mask"


def _checked(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    parents = [int(p) for p in parents]
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p}: must be -1 or an earlier index")
    return parents


def _depths(parents):
    depth = []
    for p in parents:
        depth.append(0 if p == -1 else depth[p] + 1)
    return depth


def tree_positions(parents, P):
    parents = _checked(parents, P)
    return P + np.array(_depths(parents), dtype=np.int64)


def tree_attention_mask(parents, P):
    T = len(_checked(parents, P))
    return np.arange(P + T)[None, :] <= P + np.arange(T)[:, None]
