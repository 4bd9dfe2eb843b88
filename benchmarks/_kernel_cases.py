"""What bench_kernel.py measures, shared by its numpy worker and its PyTorch worker.

Every case is one head, float32, D = 64, contiguous positions: the cache holds positions
0 .. S-1 and the T queries are the last T of them (q_positions = S-T .. S-1). Both workers draw
the same inputs from the same seed, so their outputs can be compared.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

D = 64
SEED = 20261129


@dataclass(frozen=True)
class Case:
    id: str
    name: str
    T: int
    S: int
    window: int | None = None
    target: float | None = None  # fused / dense time, at the full sizes
    sdpa_target: float | None = None  # fused / SDPA time, at the full sizes

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# The cases and targets (full sizes). Sizes are not powers of two on purpose.
CASES = [
    Case("decode", "plain decode", 1, 32_771, None, 1.5, 2.0),
    Case("verify", "speculative verify", 5, 32_771, None, 1.5),
    Case("chunk", "chunked prefill", 509, 4_099, None, 1.3),
    Case("prefill", "full prefill", 2_047, 2_047, None, 0.9),
    Case("window", "windowed chunk", 509, 32_771, 1_021, 0.2, 0.1),
]
MEMORY_CASE = Case("memory", "peak memory", 64, 262_147, None, 0.05)

# --quick: the same shapes of problem, small enough for CI to run them in a few seconds.
QUICK_CASES = [
    Case("decode", "plain decode", 1, 4_099, None, 1.5, 2.0),
    Case("verify", "speculative verify", 5, 4_099, None, 1.5),
    Case("chunk", "chunked prefill", 61, 515, None, 1.3),
    Case("prefill", "full prefill", 257, 257, None, 0.9),
    Case("window", "windowed chunk", 61, 2_051, 127, 0.2, 0.1),
]
QUICK_MEMORY_CASE = Case("memory", "peak memory", 16, 8_195, None, 0.05)


def cases(quick: bool) -> tuple[list[Case], Case]:
    return (QUICK_CASES, QUICK_MEMORY_CASE) if quick else (CASES, MEMORY_CASE)


def inputs(case: Case):
    """q [T, D], k [S, D], v [S, D] float32, q_positions [T], k_positions [S] (int64)."""
    rng = np.random.default_rng([SEED, case.T, case.S])
    q = rng.standard_normal((case.T, D), dtype=np.float32)
    k = rng.standard_normal((case.S, D), dtype=np.float32)
    v = rng.standard_normal((case.S, D), dtype=np.float32)
    return q, k, v, np.arange(case.S - case.T, case.S), np.arange(case.S)


def dense_attention(q, k, v, q_pos, k_pos, window=None):
    """What a user writes first: all T x S scores, a mask from positions, softmax, matmul.

    Returns (o [T, D], lse [T]) in float32. Every row here sees at least its own key."""
    s = (q @ k.T) * np.float32(1.0 / math.sqrt(q.shape[1]))  # [T, S]
    mask = (k_pos[None, :] >= 0) & (k_pos[None, :] <= q_pos[:, None])  # bottom-right  [T, S]
    if window is not None:
        mask &= k_pos[None, :] > q_pos[:, None] - window
    s = np.where(mask, s, -np.inf)  # [T, S]
    m = s.max(axis=1, keepdims=True)  # [T, 1]
    p = np.exp(s - m)  # [T, S]
    l = p.sum(axis=1, keepdims=True)  # [T, 1]
    return (p @ v) / l, (m + np.log(l))[:, 0]


def visible_tiles(case: Case, block_q: int, block_k: int) -> np.ndarray:
    """bool [query tiles, key tiles]: some query of the tile may see some key of the tile.

    Written from the rule directly (not from the kernel's classifier): it is what the kernel
    must load, and what its work (FLOPs) is counted on."""
    _, _, _, q_pos, k_pos = inputs(Case(case.id, case.name, case.T, case.S))
    starts = np.arange(0, case.S, block_k)
    rows = []
    for r in range(0, case.T, block_q):
        p = q_pos[r:r + block_q, None]  # [Tq, 1]
        seen = (k_pos[None, :] <= p) & ((k_pos[None, :] > p - case.window) if case.window else True)
        rows.append(np.logical_or.reduceat(seen.any(axis=0), starts))
    return np.array(rows)


def fused_work(case: Case, block_q: int, block_k: int) -> dict:
    """What a fused kernel must do: FLOPs of the tiles it computes, the fraction of (query
    tile, key tile) pairs it loads, and the keys it reads in all (summed over query tiles).

    Two products per loaded pair, scores and p @ v: 2 * D FLOPs per (query, key) each."""
    tiles = visible_tiles(case, block_q, block_k)  # [nq, nk]
    tile_rows = np.minimum(np.arange(0, case.T, block_q) + block_q, case.T) - np.arange(0, case.T, block_q)
    tile_keys = np.minimum(np.arange(0, case.S, block_k) + block_k, case.S) - np.arange(0, case.S, block_k)
    pairs = (tile_rows[:, None] * tile_keys[None, :] * tiles).sum()
    keys = int((tile_keys[None, :] * tiles).sum())
    return {"flops": 4.0 * D * float(pairs), "tile_fraction": float(tiles.mean()), "keys": keys}


def best_times(fns: dict, repeat: int, budget: float) -> dict:
    """Minimum wall time (seconds) of each function, calls interleaved so that a slow spell of
    the machine hits all of them alike; one warm-up call each first. Stops early after
    ``budget`` seconds (at least two timed calls each)."""
    for fn in fns.values():
        fn()
    best = {name: math.inf for name in fns}
    started = time.perf_counter()
    for i in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
        if i >= 1 and time.perf_counter() - started > budget:
            break
    return best
