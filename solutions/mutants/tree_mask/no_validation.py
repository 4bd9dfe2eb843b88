"""Known wrong: right for valid trees, but any parent pointer is taken on trust (no ValueError)."""
import numpy as np

EXPECTED_DIAGNOSIS = "accepts_invalid_parents"


def _rows(parents):
    T = len(parents)
    rows = np.eye(T, dtype=bool)
    for i, p in enumerate(parents):
        if p != -1:
            rows[i] |= rows[p]  # a bad p reads a row not built yet, or raises IndexError
    return rows


def tree_positions(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    return P + _rows([int(p) for p in parents]).sum(axis=1).astype(np.int64) - 1


def tree_attention_mask(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    rows = _rows([int(p) for p in parents])
    return np.concatenate([np.ones((len(rows), P), dtype=bool), rows], axis=1)
