"""Correct, written the way a strong engineer writes a live interview's core: the one invalid call
the public tests show (a draft its own parent) raises ValueError; everything else is checked
with asserts. Automatic validation beyond the shown case is then missing: hire as a take-home;
graded --live, validation is the interviewer's to ask about, so strong_hire, provisional."""
EXPECTED_LEVEL = "hire"
EXPECTED_LIVE_LEVEL = "strong_hire"

import numpy as np


def _parents(parents, P):
    assert int(P) == P and P >= 0, f"P must be an int >= 0, got {P!r}"
    array = np.asarray(parents, dtype=np.int64).reshape(-1)
    for i, p in enumerate(array):
        if p == i:  # the case the public tests show
            raise ValueError(f"parents[{i}] = {p}: a draft cannot be its own parent")
        assert -1 <= p < i, f"parents[{i}] = {p}: must be -1 or an earlier index"
    return array


def _on_path(parents):
    T = len(parents)
    path = np.eye(T, dtype=bool)
    for i, p in enumerate(parents):
        if p >= 0:
            path[i] |= path[p]
    return path


def tree_positions(parents, P):
    parents = _parents(parents, P)
    return int(P) + _on_path(parents).sum(axis=1).astype(np.int64) - 1


def tree_attention_mask(parents, P):
    parents = _parents(parents, P)
    return np.concatenate([np.ones((len(parents), int(P)), dtype=bool), _on_path(parents)], axis=1)
