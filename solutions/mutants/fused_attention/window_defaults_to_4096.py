"""Known-wrong: window defaults to 4096 (Mistral's sliding window) where the contract says None, so a caller
who leaves it out gets a window once positions pass 4096 (red team 27: every check spelled out window=None)."""
import math
from itertools import groupby

import numpy as np

from nan_safe_softmax import finalize, merge_partials, partial_attention
from tile_classification import FULL, PARTIAL, SKIP, classify_tiles, seen_by_all, seen_by_some

EXPECTED_DIAGNOSIS = ()
EXPECTED_LEVEL = "weak"

RUN_SCORES = 1 << 16  # scores of one FULL run: at most 65,536 (query, key) pairs


def may_attend(q_pos, k_pos, window=None):
    """The rule: key k is visible from query p when the slot holds a key, k <= p, k > p - W."""
    seen = (k_pos >= 0) & (k_pos <= q_pos)
    return seen if window is None else seen & (k_pos > q_pos - window)


def position_ranges(positions: np.ndarray, block: int):
    """Per tile of ``positions``: (lo, hi) over the filled slots, and whether a slot is empty.

    A tile with no filled slot has lo > hi."""
    starts = np.arange(0, len(positions), block)  # first index of each tile
    filled = positions >= 0
    lo = np.minimum.reduceat(np.where(filled, positions, np.iinfo(np.int64).max), starts)
    hi = np.maximum.reduceat(np.where(filled, positions, -1), starts)
    has_empty = ~np.logical_and.reduceat(filled, starts)
    return lo, hi, has_empty


def classify_by_position_ranges(q_positions, k_positions, block_q, block_k, window=None):
    """SKIP / PARTIAL / FULL [query tiles, key tiles] for any positions (e.g. a ring buffer).

    Generalises ``classify_tiles``: a query tile spans positions [q_lo, q_hi], a key tile
    stores positions within [k_lo, k_hi], maybe with empty slots. FULL needs no empty slot and
    the whole key range inside what every query sees (exact); SKIP needs the key range outside
    what some query may see (a safe test; PARTIAL tiles are refined element-wise later)."""
    q_lo, q_hi, _ = position_ranges(q_positions, block_q)
    k_lo, k_hi, k_empty = position_ranges(k_positions, block_k)
    q_lo, q_hi = q_lo[:, None], q_hi[:, None]  # [nq, 1]
    some_lo, some_hi = seen_by_some(q_lo, q_hi, window)
    all_lo, all_hi = seen_by_all(q_lo, q_hi, window)
    skip = (k_lo > k_hi) | (k_lo > some_hi) | (k_hi < some_lo)  # [nq, nk]
    full = ~k_empty & (k_lo >= all_lo) & (k_hi <= all_hi)  # [nq, nk]
    return np.where(skip, SKIP, np.where(full, FULL, PARTIAL)).astype(np.int8)


def classify(q_positions, k_positions, block_q, block_k, window=None):
    """Tile decisions; contiguous positions use tile_classification as it stands."""
    T, S = len(q_positions), len(k_positions)
    contiguous = np.array_equal(k_positions, np.arange(S)) and np.array_equal(q_positions, np.arange(S - T, S))
    if T <= S and contiguous:  # the T queries are the last T of S positions
        return classify_tiles(T, S, block_q, block_k, window)
    return classify_by_position_ranges(q_positions, k_positions, block_q, block_k, window)


def runs(classes: np.ndarray, block_k: int, S: int, run_tiles: int):
    """(kind, start, stop) key ranges in key order: one per PARTIAL tile, one per run of at
    most ``run_tiles`` adjacent FULL tiles; SKIP tiles are left out."""
    b = 0
    for kind, group in groupby(classes.tolist()):
        end = b + len(list(group))  # tiles b .. end - 1 share this kind
        step = run_tiles if kind == FULL else 1
        if kind != SKIP:
            for t in range(b, end, step):
                yield kind, t * block_k, min(min(t + step, end) * block_k, S)
        b = end


def full_run_state(q_tile, kv, start, stop):
    """FULL stage, no mask: the state (m_i, l_i, acc) of a run of adjacent tiles every query sees.

    The run is read with one load of exactly its keys. Both products are written keys-first
    (k @ q^T, v^T @ p^T), which BLAS runs as fast matrix-vector work when there are only a few
    queries (decode, speculative verification); the softmax runs along contiguous rows."""
    k, v = kv.load(start, stop)  # [n, D] each
    s = np.ascontiguousarray((k @ q_tile.T).T) * (1.0 / math.sqrt(q_tile.shape[1]))  # [Tq, n]
    m_i = s.max(axis=1)  # [Tq], finite: every query sees every key of the run
    p = np.exp(s - m_i[:, None])  # [Tq, n]
    return m_i, p.sum(axis=1), (v.T @ p.T).T  # m_i, l_i [Tq], acc [Tq, D]


def partial_tile_state(q_tile, q_pos, kv, k_positions, start, stop, window):
    """PARTIAL stage: mask this tile from positions; None (nothing loaded) when it is empty."""
    mask = may_attend(q_pos[:, None], k_positions[None, start:stop], window)  # [Tq, nb]
    if not mask.any():
        return None
    k, v = kv.load(start, stop)
    return partial_attention(q_tile, k, v, mask)


def lse_of(state) -> np.ndarray:
    """Epilogue: log-sum-exp of the scaled visible scores, -inf where nothing was seen."""
    m_i, l_i, _ = state
    lse = np.full_like(m_i, -np.inf)
    seen = l_i > 0
    lse[seen] = m_i[seen] + np.log(l_i[seen])
    return lse


def _check_block(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an int >= 1{' or None' if allow_none else ''}, got {value!r}")


def _validate(q, kv, q_positions, window, block_q, block_k):
    if not isinstance(q, np.ndarray) or q.ndim != 2 or not np.issubdtype(q.dtype, np.floating):
        raise ValueError(f"q must be a floating array [T, D], got {getattr(q, 'shape', type(q).__name__)}")
    T, D = q.shape
    if D < 1:  # T = 0 is valid: no queries, an empty answer
        raise ValueError(f"q must have D >= 1 columns, got shape {q.shape}")
    q_positions = np.asarray(q_positions)
    if q_positions.shape != (T,) or not np.issubdtype(q_positions.dtype, np.integer):
        raise ValueError(f"q_positions must be {T} integers (one per query row), got "
                         f"{q_positions.dtype} of shape {q_positions.shape}")
    if (q_positions < 0).any():
        raise ValueError("q_positions must be >= 0")
    k_positions = np.asarray(kv.positions)
    if k_positions.shape != (len(kv),):
        raise ValueError(f"kv.positions must have len(kv) = {len(kv)} entries, got shape {k_positions.shape}")
    _check_block("window", window, allow_none=True)
    _check_block("block_q", block_q)
    _check_block("block_k", block_k)
    return q_positions.astype(np.int64, copy=False), k_positions.astype(np.int64, copy=False)


def flash_attention(q, kv, q_positions, *, window=4096, block_q=64, block_k=128):
    """Attention of q [T, D] over the keys of ``kv`` (read only through ``kv.load``).

    Returns (o [T, D], lse [T]). Query i sits at q_positions[i]; key j at kv.positions[j]
    (-1 = empty slot). Scale 1/sqrt(D). Raises ValueError on malformed arguments."""
    q_pos, k_pos = _validate(q, kv, q_positions, window, block_q, block_k)
    (T, D), S = q.shape, len(k_pos)
    o = np.zeros((T, D), q.dtype)  # [T, D]
    lse = np.full(T, -np.inf, q.dtype)  # [T]
    if S == 0 or T == 0:  # nothing to attend, or no one to attend
        return o, lse
    # sizes may pass 2^63 (Python ints): a block past T or S is one tile, and a window past every query's
    # position limits nothing, so neither reaches int64 arithmetic with positions
    block_q, block_k = min(int(block_q), T), min(int(block_k), S)
    window = None if window is None or window > int(q_pos.max()) else int(window)
    classes = classify(q_pos, k_pos, block_q, block_k, window)  # [nq, nk]
    for a, row0 in enumerate(range(0, T, block_q)):
        rows = slice(row0, min(row0 + block_q, T))
        q_tile, q_tile_pos = q[rows], q_pos[rows]  # [Tq, D], [Tq]
        Tq = len(q_tile_pos)
        m_i, l_i, acc = np.full(Tq, -np.inf, q.dtype), np.zeros(Tq, q.dtype), np.zeros((Tq, D), q.dtype)
        state = (m_i, l_i, acc)  # the empty state: nothing seen yet
        # skip: SKIP tiles never come out of runs(), so they are never loaded
        for kind, start, stop in runs(classes[a], block_k, S, max(1, RUN_SCORES // (Tq * block_k))):
            if kind == FULL:  # full: no mask
                part = full_run_state(q_tile, kv, start, stop)
            else:  # partial: mask from positions, for this tile only
                part = partial_tile_state(q_tile, q_tile_pos, kv, k_pos, start, stop, window)
            if part is not None:
                state = merge_partials(state, part)  # online softmax: rescale to the new max, add
        o[rows] = finalize(state)  # epilogue: acc / l_i, zeros where nothing was seen
        lse[rows] = lse_of(state)
    return o, lse
