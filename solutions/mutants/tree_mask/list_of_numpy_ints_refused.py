"""Known wrong: a list or tuple of parents must hold Python ints (``type(p) is int``), so a list of numpy
integers is refused with ValueError. Section 1: wherever an int is asked for, a numpy integer works too; wherever
an index array is asked for, a list works too.
"""
EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "hire"  # numpy integers refused as such: a hygiene slip

from typing import Sequence

import numpy as np


def _validated(parents: Sequence[int], P: int) -> np.ndarray:
    """parents as an int64 array [T], after checking the tree and the cache length."""
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)):
        raise ValueError(f"P must be an int, got {type(P).__name__}")
    if P < 0:
        raise ValueError(f"P (cached tokens) must be >= 0, got {P}")
    if isinstance(parents, (list, tuple)) and not all(type(p) is int for p in parents):
        raise ValueError("parents must be a sequence of ints")  # numpy integers in a list refused
    array = np.asarray(parents)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ValueError(f"parents must be a flat sequence of ints, got {array.dtype} of shape {array.shape}")
    array = array.astype(np.int64)  # [T]
    index = np.arange(array.size)
    bad = (array < -1) | (array >= index)  # a parent is -1 or an earlier draft
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"parents[{i}] = {array[i]}: must be -1 or an index in 0..{i - 1}")
    return array


def _ancestry(parents: np.ndarray) -> np.ndarray:
    """[T, T] bool: row i marks the drafts on the path from its root down to i (itself included)."""
    T = parents.size
    on_path = np.eye(T, dtype=bool)
    for i, p in enumerate(parents):  # topological order: the parent's row is already complete
        if p >= 0:
            on_path[i] |= on_path[p]
    return on_path


def tree_positions(parents: Sequence[int], P: int) -> np.ndarray:
    """int64 [T]: draft i sits at position P + depth(i); roots (parent -1) have depth 0. Parents come
    before their children, so one pass finds every depth: memory O(T), a chain of any length."""
    parents = _validated(parents, P)
    depth = np.zeros(parents.size, dtype=np.int64)  # [T]
    for i, parent in enumerate(parents.tolist()):
        if parent >= 0:
            depth[i] = depth[parent] + 1
    return P + depth


def tree_attention_mask(parents: Sequence[int], P: int) -> np.ndarray:
    """bool [T, P + T]: draft i sees the P cached keys, its ancestors and itself.

    Column c < P is the cached key at position c (before every draft, so always visible);
    column P + j is draft j, visible when j lies on i's path from the root.
    """
    on_path = _ancestry(_validated(parents, P))  # [T, T]
    cached = np.ones((on_path.shape[0], P), dtype=bool)  # key position c < P <= every draft's  [T, P]
    return np.concatenate([cached, on_path], axis=1)  # [T, P + T]
