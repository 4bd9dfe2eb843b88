"""Slow, obviously right specs for nan_safe_softmax: one row at a time, in float64 with math.fsum.

Everything is computed from the definition: the allowed entries of a row, their largest value
m, the weights exp(s - m), their exact sum. A row with no allowed entry has no weights: its
softmax and its attention output are zeros and its log-sum-exp is -inf. Attention's (o, lse)
is the kit's one masked-attention oracle (``_oracles.attention_lse``). Inputs are converted
to float64 exactly (float32 values are float64 values) and sums of weights use math.fsum, so
the oracle's only rounding is float64's, far below what any float32 submission shows.
"""
import math

import numpy as np

from .._oracles import attention_lse as attention  # noqa: F401  (the shared (o, lse) oracle)


def softmax_row(scores, allowed) -> list[float]:
    """Softmax of the allowed entries of one row; 0.0 for the others, all 0.0 if none allowed."""
    kept = [float(s) for s, a in zip(scores, allowed) if a]
    if not kept:
        return [0.0] * len(scores)
    top = max(kept)
    weights = [math.exp(float(s) - top) if a else 0.0 for s, a in zip(scores, allowed)]
    total = math.fsum(weights)
    return [w / total for w in weights]


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """float64 [..., S]: every row of the last axis on its own."""
    S = scores.shape[-1]
    rows = zip(scores.reshape(-1, S).tolist(), mask.reshape(-1, S).tolist())
    return np.array([softmax_row(s, a) for s, a in rows], dtype=np.float64).reshape(scores.shape)


def scaled_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q k^T / sqrt(D) in float64 [T, n]. Products of float32 values are exact in float64, so
    this is the exact score up to float64's rounding of the sum."""
    return (q.astype(np.float64) @ k.astype(np.float64).T) / math.sqrt(q.shape[1])


def state_lse(m, l) -> np.ndarray:
    """What a state's (m, l) stands for: the log-sum-exp m + log(l) in float64.

    l = 0 means nothing was seen: -inf whatever m holds (unless m or l is NaN, which stays NaN
    so a check can report it)."""
    m, l = np.asarray(m, dtype=np.float64), np.asarray(l, dtype=np.float64)
    seen = l != 0
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = m + np.log(np.where(seen, l, 1.0))
    return np.where(seen | np.isnan(m) | np.isnan(l), lse, -np.inf)


def empty_state(T: int, D: int, dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The identity of merging: nothing seen."""
    return np.full(T, -np.inf, dtype), np.zeros(T, dtype), np.zeros((T, D), dtype)
