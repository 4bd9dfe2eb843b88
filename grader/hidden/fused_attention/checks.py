"""Hidden checks for fused_attention. Each ``check_*`` is one stable check id (without the prefix).

The kernel reads K and V only through the grader's ``KVSource`` (kv_source.py), which lives in
this process and logs every load; outputs are compared with the row-by-row oracle.

| sentence (CONTRACT section 1, the exercise's section, the prompt) | checks |
|---|---|
| scaled scores anywhere in [-1e4, 1e4]; unseen slots hold any finite value | far_scores_and_unseen_slots |
| float32 or float64 inputs; precision follows them | returns_output_and_lse, far_scores_and_unseen_slots |
| outputs float64, or q's dtype (the prompt allows float32 out) | returns_output_and_lse (any float dtype) |
| right values in another container or dtype: hire | every check (the plugin fails a check with slips as hygiene) |
| queries at positions in any order, keys at kv.positions (-1 empty), window W | plain_decode .. ring_buffer_window |
| loads only the tiles some query may see | loads_exactly_visible_tiles |
| (section 1) any call order: a source rewritten in place (values, positions); a new one | loads_exactly_visible_tiles |
| never a T x S allocation | no_dense_allocation |
| long contexts, positions past 2^31; sizes as large as memory allows (windows, blocks past 2^63) | long_context |
| numpy integers, list positions | numpy_integer_arguments |
| a row that sees nothing: o = 0, lse = -inf, no warning | rows_that_see_nothing |
| malformed arguments raise ValueError | rejects_invalid_arguments |
| (public tests) the invalid call they show raises ValueError, in a live grading too | rejects_the_invalid_case_shown |

Held elsewhere: ownership, calls in any order, integer dtypes (the general checks; they replay no call
with a lent source, so the loads check calls the kernel again itself).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, partial

import numpy as np

from grader.checking import (SHOWN, CheckFailure, allowing_empty, describe, edge_windows, expect_rejected, fail,
                             garbage, grid_picture, measure, middle_reading, name_mistakes, odd_size, offset_scores,
                             other_argument_types, past_int64, plural, received, slips_of, tolerance)

from . import diagnosis, oracle
from .kv_source import KVSource


@dataclass
class Case:
    label: str
    q: np.ndarray  # [T, D]
    k: np.ndarray  # [S, D]
    v: np.ndarray  # [S, D]
    q_pos: np.ndarray  # int64 [T]
    k_pos: np.ndarray  # int64 [S], -1 = empty slot
    window: int | None = None
    block_q: int = 64
    block_k: int = 128
    garbage: bool = False  # keys no query may see hold huge values

    @property
    def T(self):
        return self.q.shape[0]

    @property
    def S(self):
        return self.k.shape[0]

    @property
    def D(self):
        return self.q.shape[1]

    @cached_property
    def answer(self) -> tuple[np.ndarray, np.ndarray]:
        """The oracle's (o, lse), computed once: the tolerances and the comparisons all read it."""
        return diagnosis.right(self)

    @cached_property
    def magnitude(self) -> float:
        """m of section 1's rule: the largest finite |lse| of the right answer."""
        lse = self.answer[1]
        return float(np.max(np.abs(lse[np.isfinite(lse)]), initial=1.0))

    @cached_property
    def tol(self) -> float:
        """Section 1's tolerance for o, whose size is the values'."""
        o = self.answer[0]
        return tolerance((self.q, self.k, self.v), self.magnitude, float(np.max(np.abs(o), initial=1.0)))

    @cached_property
    def lse_tol(self) -> float:
        """Section 1's tolerance for lse, itself of the scores' size."""
        return tolerance((self.q, self.k, self.v), self.magnitude)

    def call_text(self):
        return (f"flash_attention(q [{self.T}, {self.D}], kv with {self.S:,} keys ({self.label}), q_positions, "
                f"window={self.window}, block_q={self.block_q}, block_k={self.block_k})")

    def describe(self, seed):
        return {"case": self.label, "T": self.T, "S": self.S, "D": self.D, "window": self.window,
                "block_q": self.block_q, "block_k": self.block_k, "dtype": str(self.q.dtype), "seed": seed}


def _tensors(rng, T, S, D, dtype=np.float64):
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((T, D), (S, D), (S, D)))
    return q, k, v


def contiguous(rng, T, S, D, label, window=None, block_q=64, block_k=128, dtype=np.float64):
    """The T queries are the last T of S positions; key j sits at position j."""
    q, k, v = _tensors(rng, T, S, D, dtype)
    return Case(label, q, k, v, np.arange(S - T, S, dtype=np.int64), np.arange(S, dtype=np.int64),
                window, block_q, block_k)


def ring(rng, capacity, written, T, D, label, window=None, block_q=64, block_k=128, holes=0):
    """A ring buffer of ``capacity`` slots after ``written`` tokens, ``holes`` slots emptied;
    the queries are the last T tokens written."""
    positions = oracle.ring_positions(capacity, written)
    if holes:
        positions[rng.choice(capacity, size=holes, replace=False)] = -1
    q, k, v = _tensors(rng, T, capacity, D)
    return Case(label, q, k, v, np.arange(written - T, written, dtype=np.int64), positions,
                window, block_q, block_k)


def holed(rng, T, S, D, label, holes, block_q=64, block_k=128) -> Case:
    """A plain cache (key j at position j, queries the last T) whose first and last slots are in place
    but ``holes`` slots between were freed (-1) and hold 1e30: the ends alone do not make it contiguous."""
    case = contiguous(rng, T, S, D, label, block_q=block_q, block_k=block_k)
    freed = rng.choice(np.arange(1, S - T), size=holes, replace=False)
    case.k_pos[freed] = -1
    case.k[freed], case.v[freed] = 1e30, 1e30
    case.garbage = True
    return case


def draft_tree_positions(rng, T, P) -> np.ndarray:
    """Positions of a draft tree's T nodes after P cached tokens, nodes in depth-first order: each node hangs
    below the one before or below a node higher on its branch, so positions climb along a branch and drop where
    the next branch starts."""
    depths = [0]
    for _ in range(T - 1):
        depths.append(int(rng.integers(1, depths[-1] + 2)))
    return P + np.array(depths, dtype=np.int64)


def _sibling_pairs(rng, T, P) -> np.ndarray:
    """T query positions in query tiles of 2: one tile holds the lowest and the highest, every other tile two
    siblings at one position (3 apart from the next pair), tiles in random order. Row tiles see one pair's keys
    each; tiles of the rows sorted by position (either way) split every pair, so its keys load twice."""
    inner = P + 3 * (1 + rng.permutation(T // 2 - 1))
    tiles = [[P, P + 3 * (T // 2)]] + [[x, x] for x in inner]
    rng.shuffle(tiles)
    return np.array(tiles, dtype=np.int64).ravel()


def _tiles_by_row_tell(case: Case):
    """A predicate on q_positions: whether query tiles formed from the rows sorted by position (either way)
    would load some key tile more often than row tiles ``[a*block_q, (a+1)*block_q)`` allow, so the loads
    show which rows were tiled together."""
    def holds(q_pos) -> bool:
        allowed = oracle.visible_tiles(q_pos, case.k_pos, case.window, case.block_q, case.block_k).sum(axis=0)
        return any((oracle.visible_tiles(order, case.k_pos, case.window, case.block_q, case.block_k).sum(axis=0)
                    > allowed).any() for order in (np.sort(q_pos), np.sort(q_pos)[::-1]))
    return holds


def _extremes_inside(q_pos, block_q, margin) -> bool:
    """Whether some query tile's lowest and highest positions lie inside it, at least ``margin`` beyond both its
    first and last positions: bounds read from a tile's ends then misjudge the key tiles between (FULL though the
    lowest query does not see them, SKIP though the highest does), whatever the ends are combined into."""
    for start in range(0, len(q_pos), block_q):
        tile = q_pos[start:start + block_q]
        ends = tile[[0, -1]]
        if tile.min() + margin <= ends.min() and ends.max() + margin <= tile.max():
            return True
    return False


_ORDER_DRAWS = 1_000  # bounds the redraws: the draws used qualify 5% (trees) to 40% of the time


def in_any_order(rng, case: Case, draw, how: str, margin: int = 1, holds=None) -> Case:
    """``case`` with q_positions ``draw(rng)`` (T of them, in any order: the prompt restricts none), drawn again
    until ``holds(q_pos)`` (by default :func:`_extremes_inside`; ``margin``: block_k, so a whole tile of
    contiguous keys lies between)."""
    holds = holds or (lambda q_pos: _extremes_inside(q_pos, case.block_q, margin))
    for _ in range(_ORDER_DRAWS):
        if holds(q_pos := np.asarray(draw(rng), dtype=np.int64)):
            case.q_pos, case.label = q_pos, f"{case.label}, {how}"
            return case
    raise AssertionError(f"kit bug: no order of {how} in {_ORDER_DRAWS} draws has what the case needs")


def run(ex, case, measured=False, kinds=(int, np.asarray), memory=True, source=None):
    """Call the kernel on ``case``; (o, lse, source, peak bytes or None, warnings) once the outputs
    have the right form. ``kinds``: the types sizes and q_positions are sent as (numpy ints, a list).
    ``measured`` takes the call through checking.measure (warnings, and the peak with ``memory``).
    ``source``: a KVSource lent before, holding ``case``'s keys and values now (a new one if None)."""
    as_int, as_positions = kinds
    source = KVSource(case.k, case.v, case.k_pos) if source is None else source
    window = None if case.window is None else as_int(case.window)
    args = (case.q, source, as_positions(case.q_pos))
    kwargs = dict(window=window, block_q=as_int(case.block_q), block_k=as_int(case.block_k))
    if measured:
        attempt = partial(measure, ex, ex.candidate, "flash_attention", *args, memory=memory, **kwargs)
    else:
        def attempt():
            return ex.candidate.flash_attention(*args, **kwargs), None, []
    nothing = (np.zeros((case.T, case.D)), np.full(case.T, -np.inf))  # the answer when T or S is 0
    value, peak, warnings = allowing_empty(ex, attempt, empty=0 in (case.T, case.S), what=case.call_text(),
                                           stand_in=lambda: (nothing, None, []))
    call, where = case.call_text(), case.describe(ex.seed)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        fail(f"{call} returned {describe(value)}; expected a tuple (o, lse)", where)
    slips = slips_of(ex)
    o = received(value[0], call=f"{call}[0] (o)", shape=(case.T, case.D), kind="f", slips=slips, case=where)
    lse = received(value[1], call=f"{call}[1] (lse)", shape=(case.T,), kind="f", slips=slips, case=where)
    return o, lse, source, peak, warnings


def _first_difference(got, want, tol):
    """Index of the first entry (row for 2-D) where got and want disagree."""
    bad = ~np.isclose(got, want, rtol=0, atol=tol, equal_nan=False)
    bad |= np.isnan(got) != np.isnan(want)
    bad = bad.any(axis=1) if bad.ndim == 2 else bad
    return int(np.flatnonzero(bad)[0])


def _error(got, want):
    """Largest absolute difference; a NaN, or an infinity where the other side differs, counts as inf."""
    got, want = got.astype(np.float64), np.asarray(want, dtype=np.float64)
    both = np.isfinite(got) & np.isfinite(want)
    diff = np.abs(np.where(both, got, 0.0) - np.where(both, want, 0.0))
    diff[~both & ~(got == want)] = np.inf
    return diff


def _wrong(case, o, lse) -> bool:
    want_o, want_lse = case.answer
    return not (diagnosis.same(o, want_o, case.tol) and diagnosis.same(lse, want_lse, case.lse_tol))


def expect_outputs(ex, case, o, lse):
    """o and lse must match the oracle."""
    if _wrong(case, o, lse):
        fail_outputs(ex, [(case, (o, lse))])


def fail_outputs(ex, failures):
    """Fail on the first of ``failures`` [(case, (o, lse))]; a known mistake is named only when it
    explains every one. NaN where a number was due is its own kind."""
    case, (o, lse) = failures[0]
    want_o, want_lse = case.answer
    ok_o = diagnosis.same(o, want_o, case.tol)
    name, got, want, tol = ("o", o, want_o, case.tol) if not ok_o else ("lse", lse, want_lse, case.lse_tol)
    row = _first_difference(got, want, tol)
    error = _error(got, want)
    seen = int(oracle.visible_keys(int(case.q_pos[row]), case.k_pos, case.window).sum())
    message = (f"{case.call_text()}: {name} differs from the expected value in row {row} (position "
               f"{int(case.q_pos[row]):,}, which sees {seen:,} key{'s' if seen != 1 else ''}), by up to "
               f"{float(error.max()):.3g} over all rows"
               + (f" ({len(failures)} cases wrong)" if len(failures) > 1 else ""))
    if name == "lse":
        message += f"; row {row}: got {float(lse[row]):.6g}, expected {float(want_lse[row]):.6g}"
    nan = [c for c, (o_, l_) in failures if np.isnan(o_).any() or np.isnan(l_).any()]
    if nan and all(c.garbage for c in nan):  # NaN only where unseen keys hold huge values
        fail(f"{message}; NaN appears only where keys no query may see hold huge values: a masked key "
             "still entered the arithmetic (exp of a huge score is inf, and inf * 0 is NaN), or a cast to a narrower "
             "dtype made it inf", case.describe(ex.seed),
             kind="nan")
    if nan:
        sentence = diagnosis.nan_sentence(case, o, want_lse)
        ex.diagnose("nan_on_fully_masked_row", sentence)
        fail(f"{message}; {sentence}", case.describe(ex.seed), kind="nan")
    message += name_mistakes(ex, diagnosis.explain_outputs(failures))
    fail(message, case.describe(ex.seed))


def expect_cases(ex, cases, kinds=(int, np.asarray)):
    """Every case must match the oracle; report the first failing one."""
    failures = []
    for case in cases:
        o, lse, *_ = run(ex, case, kinds=kinds)
        if _wrong(case, o, lse):
            failures.append((case, (o, lse)))
    if failures:
        fail_outputs(ex, failures)


def check_returns_output_and_lse(ex):
    """Returns (o [T, D], lse [T]) as float arrays, for float64 and float32 inputs."""
    rng = ex.rng
    for dtype in (np.float64, np.float32):
        case = contiguous(rng, 3, 45, 8, "contiguous", block_q=2, block_k=16, dtype=dtype)
        o, lse, *_ = run(ex, case)
        expect_outputs(ex, case, o, lse)


def check_plain_decode(ex):
    """Plain decode, T = 1: the single query sees every cached key."""
    rng = ex.rng
    expect_cases(ex, [contiguous(rng, 1, 1, 4, "decode, one key"),
                      contiguous(rng, 1, odd_size(rng, 30, 200), 16, "decode", block_k=7),
                      contiguous(rng, 1, 4099, 64, "decode"),
                      contiguous(rng, 1, 3001, 32, "decode, float32", dtype=np.float32)])


def check_speculative_verify(ex):
    """Speculative verification, T = 5 (a 4-token draft plus one) over a long cache; then a draft tree, its queries
    in depth-first order, so positions inside a query tile are not monotone (one key per tile)."""
    rng = ex.rng
    S = odd_size(rng, 40, 120)
    tree = in_any_order(rng, contiguous(rng, 12, S, 8, "draft tree", block_q=4, block_k=1),
                        lambda rng: draft_tree_positions(rng, 12, S - 12), "queries depth-first")
    expect_cases(ex, [contiguous(rng, 5, 4099, 32, "speculative verify"),
                      contiguous(rng, 5, odd_size(rng, 100, 400), 16, "speculative verify", block_q=3, block_k=11),
                      tree])


def check_chunked_prefill(ex):
    """Chunked prefill: a chunk of T new tokens after many cached ones (S = cached + T)."""
    rng = ex.rng
    cached = odd_size(rng, 1_000, 3_000)
    chunk = odd_size(rng, 60, 200)
    expect_cases(ex, [contiguous(rng, chunk, cached + chunk, 16, "chunked prefill", block_q=32, block_k=96),
                      contiguous(rng, 509, 4099, 16, "chunked prefill")])


def check_full_prefill(ex):
    """Full prefill, T = S: the causal triangle, with the diagonal crossing tiles."""
    rng = ex.rng
    expect_cases(ex, [contiguous(rng, 97, 97, 8, "prefill", block_q=16, block_k=16),
                      contiguous(rng, 130, 130, 16, "prefill", block_q=13, block_k=29),
                      contiguous(rng, 300, 300, 16, "prefill")])


def check_odd_block_sizes(ex):
    """Random T x S with block sizes that divide nothing (down to 1 x 1 tiles)."""
    rng = ex.rng
    cases = []
    for _ in range(6):
        S = odd_size(rng, 5, 160)
        T = int(rng.integers(2, min(S, 40) + 1))
        cases.append(contiguous(rng, T, S, int(rng.integers(1, 20)), "contiguous",
                                block_q=int(rng.integers(1, T + 3)), block_k=int(rng.integers(1, 50))))
    cases.append(contiguous(rng, 7, 45, 5, "contiguous", block_q=1, block_k=1))
    expect_cases(ex, cases)


def check_sliding_window(ex):
    """Contiguous positions with a sliding window: each query sees exactly W positions; queries of a chunk shuffled
    too (positions in any order inside a query tile); windows at the sequence's edges, where the first or the last
    query just sees, or just misses, the oldest key (sizes one apart around S)."""
    rng = ex.rng
    S = odd_size(rng, 300, 900)
    shuffled = in_any_order(rng, contiguous(rng, 12, S, 8, "chunk, window", window=odd_size(rng, 20, 40), block_q=6,
                                            block_k=2),
                            lambda rng: rng.permutation(np.arange(S - 12, S)), "queries shuffled", margin=2)
    expect_cases(ex, [contiguous(rng, 1, S, 16, "decode, window", window=odd_size(rng, 20, 200)),
                      contiguous(rng, 45, S, 16, "chunk, window", window=67, block_q=16, block_k=20),
                      contiguous(rng, 97, 97, 8, "prefill, window", window=13, block_q=10, block_k=7),
                      contiguous(rng, 12, 40, 4, "window of one", window=1, block_q=5, block_k=3),
                      contiguous(rng, 9, 50, 4, "window wider than the cache", window=1_000, block_q=4, block_k=6),
                      shuffled, *_edge_windows(rng)])


def _edge_windows(rng) -> list:
    """Chunks whose window is one of the sizes where key 0 enters or leaves the first or the last query's view."""
    S, T = odd_size(rng, 30, 90), int(rng.integers(2, 9))
    return [contiguous(rng, T, S, 4, "chunk, window at the sequence's edge", window=W,
                       block_q=int(rng.integers(1, T + 2)), block_k=int(rng.integers(2, 40)))
            for W in edge_windows(S, T)]


def check_ring_buffer_positions(ex):
    """Ring-buffer positions (unsorted, empty slots, freed slots between ends in place), no window: the rule
    uses stored positions; the queries shuffled too (positions in any order inside a query tile)."""
    rng = ex.rng
    capacity = odd_size(rng, 100, 300)
    small, written = odd_size(rng, 40, 90), int(rng.integers(200, 400))
    shuffled = in_any_order(rng, ring(rng, small, written, 8, 8, "ring buffer, wrapped", block_q=4, block_k=1),
                            lambda rng: rng.permutation(np.arange(written - 8, written)), "queries shuffled")
    expect_cases(ex, [ring(rng, capacity, int(rng.integers(capacity + 20, 3 * capacity)), 5, 16,
                           "ring buffer, wrapped", block_q=2, block_k=16),
                      ring(rng, capacity, int(rng.integers(40, capacity - 20)), 7, 8,
                           "ring buffer, not yet full", block_q=3, block_k=13),
                      ring(rng, 45, 130, 9, 8, "ring buffer with empty slots", block_q=4, block_k=6, holes=7),
                      holed(rng, 6, odd_size(rng, 60, 120), 8, "slots 0 and S - 1 in place, freed slots between",
                            holes=5, block_q=4, block_k=16),
                      shuffled])


def check_ring_buffer_window(ex):
    """Ring-buffer positions with a sliding window, including a chunk that overwrote old keys and a draft tree
    (queries depth-first, positions not monotone); then a ring not yet full whose window passes every position,
    p - W < -1: the window's bound alone does not keep out an empty slot's -1."""
    rng = ex.rng
    capacity = odd_size(rng, 100, 300)
    window = int(rng.integers(capacity // 3, capacity - 20))
    small, written = odd_size(rng, 40, 90), int(rng.integers(200, 400))
    tree = in_any_order(rng, ring(rng, small, written, 12, 8, "ring buffer, window", window=odd_size(rng, 15, 40),
                                  block_q=4, block_k=1),
                        lambda rng: draft_tree_positions(rng, 12, written - 12), "a draft tree, queries depth-first")
    filling = int(rng.integers(20, small - 10))  # slots filling .. small - 1 still empty
    wide = filling + int(rng.integers(1, 50))  # >= p + 2 for every query
    expect_cases(ex, [ring(rng, capacity, int(rng.integers(2 * capacity, 5 * capacity)), 1, 16,
                           "ring buffer decode, window", window=window, block_k=32),
                      ring(rng, capacity, int(rng.integers(2 * capacity, 5 * capacity)), 40, 8,
                           "ring buffer chunk, window", window=window, block_q=16, block_k=24),
                      ring(rng, 67, 300, 30, 8, "ring buffer chunk, window, holes", window=50,
                           block_q=7, block_k=10, holes=9),
                      tree,
                      ring(rng, small, filling, 1, 8, "ring buffer not yet full, decode, window past every position",
                           window=wide, block_k=small),  # one tile: every filled slot plus the empty ones
                      ring(rng, small, filling, 5, 8, "ring buffer not yet full, chunk, window past every position, "
                           "holes", window=wide, block_q=2, block_k=7, holes=6)])


def _far(rng, case: Case, dtype, kv_dtype=None) -> Case:
    """``case`` with each query's scaled scores near an offset of its own in [-1e4, 1e4] (the first far
    below 0, the second far above, the third just above -1e4), q in ``dtype``, k and v in ``kv_dtype``
    (``dtype`` if None), and every key no query may see (empty slots, keys before every window) holding
    any finite value: up to 1e300, past what q's dtype holds, when k and v are wider (a tile cast to q's
    dtype turns them to inf)."""
    kv_dtype = dtype if kv_dtype is None else kv_dtype
    offsets = rng.uniform(-1e4, 1e4, case.T)
    # the third just above -1e4, the range's bottom: a finite fill there (-1e4, BERT's) weighs like a seen key
    offsets[:3] = [-rng.uniform(800, 1e4), rng.uniform(800, 1e4), -1e4 + rng.uniform(3, 6)][:case.T]
    case.q, k = offset_scores(rng, offsets, case.S, case.D, dtype)
    case.k, case.v = k.astype(kv_dtype), case.v.astype(kv_dtype)
    unseen = ~np.any([oracle.visible_keys(int(p), case.k_pos, case.window) for p in case.q_pos], axis=0)
    beyond = np.finfo(kv_dtype).max > np.finfo(dtype).max
    case.k[unseen] = garbage(rng, case.k[unseen].shape, kv_dtype, beyond_float32=beyond)
    case.v[unseen] = garbage(rng, case.v[unseen].shape, kv_dtype, beyond_float32=beyond)
    kinds = np.dtype(dtype).name + ("" if kv_dtype == dtype else f" q, {np.dtype(kv_dtype).name} k and v")
    case.label += f", {kinds}, scores far from 0, unseen keys holding garbage"
    case.garbage = True
    return case


def check_far_scores_and_unseen_slots(ex):
    """Scaled scores from -1e4 to 1e4, float32 and float64 (float32 q beside float64 k and v too), with keys no query
    may see holding any finite value (beside float32 q, float64 values up to 1e300, which float32 does not hold)."""
    rng, cases = ex.rng, []
    for dtype, kv_dtype in ((np.float32, np.float32), (np.float64, np.float64), (np.float32, np.float64)):
        cases += [_far(rng, contiguous(rng, 9, odd_size(rng, 200, 400), 8, "chunk, window", window=60, block_q=4,
                                       block_k=32), dtype, kv_dtype),
                  _far(rng, ring(rng, 67, 300, 7, 8, "ring buffer, window, holes", window=50, block_q=3, block_k=10,
                                 holes=9), dtype, kv_dtype)]
    expect_cases(ex, cases)


def _expect_loads(ex, case, source):
    """The keys read are exactly those of the visible tiles, each at most once per query tile."""
    tiles = oracle.visible_tiles(case.q_pos, case.k_pos, case.window, case.block_q, case.block_k)
    allowed = np.repeat(tiles.sum(axis=0), case.block_k)[:case.S]  # query tiles needing each key
    times = source.times_loaded()  # [S]
    tile_of = np.arange(case.S) // case.block_k
    where = case.describe(ex.seed)
    starts = np.arange(0, case.S, case.block_k)
    expected = np.minimum(allowed[starts], 10)[None]  # [1, key tiles], 10 stands for 10 or more
    submitted = np.minimum(np.maximum.reduceat(times, starts), 10)[None]
    shown = sorted(set(expected.ravel().tolist()) | set(submitted.ravel().tolist()))
    picture = grid_picture(expected, submitted,
                           f"times each key tile of {case.block_k} was loaded, {case.label}: expected at most the "
                           "number of query tiles that see it",
                           labels={str(n): str(n) if n < 10 else "+" for n in shown})
    _expect_not_contiguous_layout(ex, case, times, allowed, where, picture)
    never = (allowed == 0) & (times > 0)
    if never.any():
        b = int(tile_of[np.flatnonzero(never)[0]])
        invisible = int((tiles.sum(axis=0) == 0).sum())
        loaded = len(set(tile_of[never].tolist()))
        ex.diagnose("loads_skipped_tiles",
                    f"{loaded} of the {invisible} key tiles that no query may see were loaded anyway "
                    f"(first: keys {b * case.block_k}..{min((b + 1) * case.block_k, case.S) - 1}, "
                    f"in {case.label} with T = {case.T}, S = {case.S:,}); decide from positions before loading")
        fail(f"{case.call_text()} loaded key tile {b} (keys {b * case.block_k}..."
             f"{min((b + 1) * case.block_k, case.S) - 1}), which no query may see", where, picture, kind="must_not")
    extra = times > allowed
    if extra.any():
        j = int(np.flatnonzero(extra)[0])
        b = int(tile_of[j])
        stored = case.k_pos[b * case.block_k:(b + 1) * case.block_k]
        stored = stored[stored >= 0]
        span = f" (positions {int(stored.min()):,}..{int(stored.max()):,})" if stored.size else ""
        ex.diagnose("loads_skipped_tiles",
                    f"key tile {b}{span} was loaded {plural(int(times[j]), 'time')} though only "
                    f"{plural(int(allowed[j]), 'query tile')} may see it: it is loaded for query tiles that "
                    "must skip it "
                    f"({case.label}, T = {case.T}, S = {case.S:,}); compare positions before loading")
        fail(f"{case.call_text()} loaded key {j} (tile {b}) {plural(int(times[j]), 'time')}; only "
             f"{plural(int(allowed[j]), 'query tile')} may see that tile", where, picture, kind="must_not")
    missing = (allowed > 0) & (times == 0)
    if missing.any():
        j = int(np.flatnonzero(missing)[0])
        fail(f"{case.call_text()} never loaded key {j} (tile {int(tile_of[j])}), though a query "
             f"tile may see that tile: load whole tiles", where, picture)


def _expect_not_contiguous_layout(ex, case, times, allowed, where, picture):
    """Fail when the loads are those of classify_tiles' layout (keys at 0..S-1, queries the last
    T of S) although this source stores other positions."""
    if case.T > case.S:
        return
    layout = oracle.visible_tiles(np.arange(case.S - case.T, case.S), np.arange(case.S), case.window,
                                  case.block_q, case.block_k)
    assumed = np.repeat(layout.sum(axis=0), case.block_k)[:case.S]
    if np.array_equal(assumed, allowed) or not np.array_equal(times, assumed):
        return
    per_tile = np.arange(0, case.S, case.block_k)
    missed = int(((allowed[per_tile] > 0) & (assumed[per_tile] == 0)).sum())
    wasted = int(((allowed[per_tile] == 0) & (assumed[per_tile] > 0)).sum())
    ex.diagnose("contiguous_tiles_assumed",
                f"tiles were chosen as if key j sat at position j and the queries were the last {case.T} of "
                f"{case.S} positions, but this cache ({case.label}) stores other positions (slot 0 holds "
                f"{int(case.k_pos[0]):,}): {plural(missed, 'needed key tile')} never loaded, {wasted} loaded for "
                "nothing; classify from the stored positions")
    fail(f"{case.call_text()} loaded the tiles a contiguous cache would need, not those these stored "
         "positions need", where, picture, kind="must_not")


def _written_on(rng, case):
    """``case`` as its cache stands after block_k to S + block_k more tokens written as a ring buffer of S
    slots (empty slots filled, the wrap moved): whole tiles hold other positions; the queries are the newest T."""
    written = max(int(case.k_pos.max(initial=-1)) + 1, case.T) + int(rng.integers(case.block_k, case.S + case.block_k))
    return replace(case, k_pos=oracle.ring_positions(case.S, written),
                   q_pos=np.arange(written - case.T, written, dtype=np.int64))


def _called_again(rng, case, source):
    """(case, source, the positions it held before or None) for three more calls: two alike in all the kernel
    is given but the keys' and values' contents, which only a load reads: ``source`` itself after the caller
    rewrote its k and v in place (as a ring buffer writes its slots), then a fresh source; between them
    ``source`` itself again after the caller wrote on (its positions too, in place, and the queries the newest).
    A tile or answer kept from an earlier call, keyed on anything the kernel can see (the source's id, its
    length, the tile's bounds or positions, q), is stale there; so are tile bounds kept per source."""
    case = replace(case, k_pos=case.k_pos.copy())  # the source's positions are rewritten below, not the case's
    def other(how):
        k, v = (rng.standard_normal(a.shape).astype(a.dtype) for a in (case.k, case.v))
        return replace(case, k=k, v=v, label=f"{case.label}, {how}")
    rewritten = other("the same KVSource again after the caller rewrote its keys and values in place")
    source.k[...], source.v[...] = rewritten.k, rewritten.v
    source.loads.clear()
    yield rewritten, source, None
    moved = _written_on(rng, other("the same KVSource again after the caller wrote on as a ring buffer, "
                                   "positions, keys and values in place"))
    source.k[...], source.v[...], source.positions[...] = moved.k, moved.v, moved.k_pos
    source.loads.clear()
    yield moved, source, case.k_pos
    fresh = other("a fresh KVSource with other keys and values at the same positions")
    yield fresh, KVSource(fresh.k.copy(), fresh.v.copy(), fresh.k_pos), None


def _expect_not_stale(ex, case, positions, o, lse):
    """Fail, naming no mistake, when the answer is the one for the ``positions`` the source held before the
    caller rewrote them: that is positions kept from an earlier call, whatever else it resembles."""
    if _wrong(case, o, lse) and not _wrong(replace(case, k_pos=positions), o, lse):
        fail(f"{case.call_text()}: the answer for the positions the source held before the caller rewrote them in "
             "place; positions or tile bounds kept per source (a memo keyed on the source, part of the arguments) "
             "go stale when the cache writes on", case.describe(ex.seed))


def check_loads_exactly_visible_tiles(ex):
    """Loads exactly the key tiles some query of the query tile may see, never a skipped one (query tiles are
    rows in the order given: queries in any order, a narrow window and one key per tile show how rows were
    grouped), and answers from what it loads: each case is called again on the same source after the caller
    rewrote its keys and values in place, again after it wrote on as a ring buffer (positions of whole
    tiles moved in place, empty slots filled, newer queries), then on a fresh source with other values at
    the original positions (calls in any order)."""
    rng = ex.rng
    S = odd_size(rng, 1_000, 2_000)
    cases = [contiguous(rng, 1, S, 8, "decode", block_k=64),
             contiguous(rng, 75, 75, 8, "prefill", block_q=16, block_k=10),
             contiguous(rng, 61, S, 8, "chunk, window", window=101, block_q=16, block_k=32),
             contiguous(rng, 1, S, 8, "decode, window", window=300, block_k=50),
             contiguous(rng, 1, S, 8, "decode, window inside a tile or two", window=odd_size(rng, 5, 40),
                        block_k=64),  # a call that reads one or two tiles: a cache of any size holds them all
             ring(rng, 97, 1_000, 20, 8, "ring buffer, window", window=40, block_q=8, block_k=9),
             ring(rng, 97, 60, 6, 8, "ring buffer, not yet full", block_q=3, block_k=10, holes=5),
             ring(rng, 67, 0, 3, 8, "empty ring buffer", block_q=2, block_k=10)]
    cases[-1].q_pos = np.array([0, 1, 2], dtype=np.int64)
    pairs = contiguous(rng, 12, odd_size(rng, 40, 90), 8, "sibling drafts, window", window=int(rng.integers(1, 3)),
                       block_q=2, block_k=1)
    cases.append(in_any_order(rng, pairs, partial(_sibling_pairs, T=12, P=pairs.S - 19), "siblings side by side",
                              holds=_tiles_by_row_tell(pairs)))
    for case in cases:
        o, lse, source, *_ = run(ex, case)
        _expect_loads(ex, case, source)
        expect_outputs(ex, case, o, lse)
        for again, lent, moved_from in _called_again(rng, case, source):
            o, lse, *_ = run(ex, again, source=lent)
            if moved_from is None:  # the values first: a stale tile is a wrong answer
                expect_outputs(ex, again, o, lse)
                _expect_loads(ex, again, lent)
            else:  # positions moved: an answer from the old ones first, then the tiles (a layout assumed shows there)
                _expect_not_stale(ex, again, moved_from, o, lse)
                _expect_loads(ex, again, lent)
                expect_outputs(ex, again, o, lse)


DENSE_PATHS = ("chunk, window", "chunk, no window", "a chunk inside one query tile", "ring buffer chunk, window",
               "ring buffer chunk, empty slots")  # every path of the kernel with T > 1


def _dense_case(rng, path: str):
    """A call on ``path`` (T > 1: at T = 1 a T x S array is only O(S), and the loads check judges that path),
    big enough that a T x S mask shows in the peak. T past 1,000, D of 2 to 8 and block_k of 200 to 1,000,
    drawn anew each time as every value check draws its own (no constant of these calls tells them from
    the rest: a red team kept the mask off only where D = 4): the prompt lets a run of adjacent tiles come
    in one load, so every key and value at once (2 x S x D floats, and a copy) is the answer's to hold, and
    only a T x S array stands out above it."""
    S = odd_size(rng, 20_000, 25_000)  # T x S ~ 25M cells without a window: cheap to compute, plain to see
    T, D, B = odd_size(rng, 1_021, 1_100), int(rng.integers(2, 9)), int(rng.integers(200, 1_001))  # B: block_k
    if path == "chunk, window":
        return contiguous(rng, odd_size(rng, 1_001, 1_050), 2 * S, D, path, window=odd_size(rng, 900, 1_100),
                          block_k=B)
    if path == "chunk, no window":
        return contiguous(rng, T, S, D, path, block_k=B)
    if path == "a chunk inside one query tile":  # a smaller block_k: T x block_k float64 scores, and their
        # temporaries, stay well under the bound
        return contiguous(rng, T, S, D, path, block_q=odd_size(rng, 1_200, 2_100), block_k=B // 4 + 50)
    if path == "ring buffer chunk, window":
        return ring(rng, 2 * S, 7 * S + 17, odd_size(rng, 1_001, 1_050), D, path, window=odd_size(rng, 450, 600),
                    block_k=B)
    return ring(rng, S, S - 50, T, D, path, block_k=B, holes=99)


def _expect_sampled_rows(ex, case, o, lse, count=3):
    """``count`` rows drawn at random (the first and last included) match the oracle; on a miss,
    every row is compared (slow, only then). The sample is judged with section 1's tolerance for
    the values it involves, so a passing answer never costs an oracle run over every row."""
    rows = np.unique(np.concatenate([[0, case.T - 1], ex.rng.integers(0, case.T, count)]))
    if _wrong(replace(case, q=case.q[rows], q_pos=case.q_pos[rows]), o[rows], lse[rows]):
        expect_outputs(ex, case, o, lse)


def _dense_peak(ex, case) -> int | None:
    """The peak of one measured call on ``case``, once its answer is right (a measured answer counts like any
    other), less what loading every key and value at once may hold (the prompt allows a run of tiles in
    one load): their bytes once more, beside the copy ``measure`` already allows."""
    o, lse, _, peak, _ = run(ex, case, measured=True)
    _expect_sampled_rows(ex, case, o, lse)
    return None if peak is None else max(0, peak - (case.k.nbytes + case.v.nbytes))


def check_no_dense_allocation(ex):
    """Peak memory stays far below T x S bytes (no dense mask or score matrix) on every path:
    window or none, contiguous or ring positions with empty slots, one query tile or many."""
    for path in DENSE_PATHS:
        drawn = []  # every reading draws fresh sizes (middle_reading)

        def reading():
            drawn.append(_dense_case(ex.rng, path))
            case, peak = drawn[-1], _dense_peak(ex, drawn[-1])
            return None if peak is None else (peak / (case.T * case.S), (case, peak))  # bytes per T x S cell

        try:
            middle = middle_reading(0.5, reading)
        except CheckFailure as failure:  # out of memory: the allocation itself was the mistake
            if failure.kind != "must_not":
                raise
            case = drawn[-1]
            ex.diagnose("dense_mask_materialized", f"a call with T = {case.T:,} queries over S = {case.S:,} keys "
                        f"({case.label}) ran out of memory; a T x S boolean mask alone is "
                        f"{case.T * case.S / 2**20:.1f} MiB")
            raise
        if middle is None or middle[0] < 0.5:
            continue  # nothing measured is not evidence either way
        case, peak = middle[1]
        dense = case.T * case.S  # a boolean T x S mask, the smallest dense object
        ex.diagnose("dense_mask_materialized",
                    f"a call with T = {case.T:,} queries over S = {case.S:,} keys ({case.label}) peaked at "
                    f"{peak / 2**20:.1f} MiB besides the keys and values loaded; a T x S boolean mask alone is "
                    f"{dense / 2**20:.1f} MiB, while the tiles of {case.block_q} x {case.block_k} need under 2 MiB")
        fail(f"{case.call_text()} allocated up to {peak:,} bytes besides the keys and values loaded; a T x S bool "
             f"mask is {dense:,} bytes, and a tiled kernel needs a few tiles", case.describe(ex.seed), kind="must_not")


def check_long_context(ex):
    """A cache of hundreds of thousands of keys and positions past 2^16 and 2^31 in a ring buffer, and a window
    of 2^63 - 1 (sys.maxsize) over a short one; then positions past 2^62 and windows and block sizes past 2^63
    (a window past every position limits nothing, a block past T or S is one tile), where a failure is hygiene:
    Python ints hold them, int64 does not."""
    rng = ex.rng
    S = odd_size(rng, 150_000, 250_000)
    long = contiguous(rng, 3, S, 8, "long context, window", window=odd_size(rng, 3_000, 9_000), block_k=1024)
    far = [ring(rng, 301, written, 9, 8, label, window=200, block_q=4, block_k=37)
           for written, label in ((2**16 + odd_size(rng, 100, 999), "ring buffer past 2^16"),
                                  (2**31 + odd_size(rng, 100, 999), "ring buffer past 2^31"))]
    written = 2**62 + odd_size(rng, 1_000, 9_999)  # a key plus this window passes 2^63
    huge = [ring(rng, 301, written, 9, 8, "ring buffer past 2^62, window past 2^62", window=written - 150, block_q=4,
                 block_k=37),
            ring(rng, 67, 300, 30, 8, "ring buffer, window past 2^63", window=2**63 + odd_size(rng, 1, 999),
                 block_q=7, block_k=10, holes=9),
            contiguous(rng, 9, odd_size(rng, 100, 300), 8, "window 2^70", window=2**70, block_q=4, block_k=16),
            contiguous(rng, 7, 45, 8, "block sizes past 2^63", block_q=2**63 + odd_size(rng, 1, 999),
                       block_k=2**64 + odd_size(rng, 1, 999)),
            contiguous(rng, 1, odd_size(rng, 100, 300), 8, "decode, window and block_k past 2^63",
                       window=2**63 + odd_size(rng, 1, 999), block_k=2**63 + odd_size(rng, 1, 999))]
    no_limit = contiguous(rng, 5, odd_size(rng, 60, 200), 8, "window 2^63 - 1 (sys.maxsize, no limit)",
                          window=2**63 - 1, block_q=4, block_k=16)  # int64 holds it: judged like any window
    expect_cases(ex, [long] + far + [no_limit])
    with past_int64("sizes past int64"):
        expect_cases(ex, huge)


def check_numpy_integer_arguments(ex):
    """window and block sizes as numpy integers (np.int64, np.int32, and int8 / int16 beside positions that
    reach those dtypes' tops), q_positions as a list or an array of those dtypes; then int8, int16 and
    int32 q_positions near their dtype's top with a window (a Python int) wider than that dtype holds."""
    rng = ex.rng
    cases = [contiguous(rng, 7, 45, 8, "contiguous", window=9, block_q=3, block_k=8),
             ring(rng, 45, 130, 9, 8, "ring buffer with empty slots", window=30, block_q=4, block_k=6, holes=7)]
    expect_cases(ex, cases)  # Python ints first: a wrong answer is said as such, never blamed on the type
    with other_argument_types("flash_attention rejected numpy integers or a list of positions"):
        expect_cases(ex, cases, kinds=(np.int64, np.asarray))
        expect_cases(ex, cases, kinds=(np.int64, lambda positions: [int(p) for p in positions]))
    expect_cases(ex, cases, kinds=(np.int32, np.asarray))  # once int64 works, a narrow dtype that fails is wrong
    for dtype in (np.int8, np.int16):  # positions up to the top of the dtype they come in: p + 1 wraps there
        top = int(np.iinfo(dtype).max) + 1
        edge = ring(rng, 23, top, 5, 8, f"ring buffer, positions up to {top - 1}, q_positions {np.dtype(dtype).name}",
                    window=19, block_q=2, block_k=4, holes=3)
        expect_cases(ex, [edge], kinds=(dtype, lambda positions, dtype=dtype: np.asarray(positions, dtype)))
    for dtype in (np.int8, np.int16, np.int32):  # q_positions - window in their own dtype overflows or wraps
        top = int(np.iinfo(dtype).max) + 1
        wide = ring(rng, 23, top - int(rng.integers(0, 20)), 5, 8, f"ring buffer, q_positions {np.dtype(dtype).name} "
                    "near its top, a window wider than that dtype", window=top + int(rng.integers(0, 3 * top)),
                    block_q=2, block_k=4, holes=3)
        expect_cases(ex, [wide], kinds=(int, lambda positions, dtype=dtype: np.asarray(positions, dtype)))


def check_rows_that_see_nothing(ex):
    """A row that sees no key gives o = 0 and lse = -inf, with no NaN and no numpy warning, an empty cache
    (S = 0) included; no queries at all (T = 0, with and without a window, over keys or over none) give
    o [0, D] and lse [0]."""
    rng = ex.rng
    empty = ring(rng, 37, 0, 4, 8, "every slot empty", block_q=3, block_k=10)
    empty.q_pos = np.array([0, 5, 9, 40], dtype=np.int64)
    holes = contiguous(rng, 6, 40, 8, "own slot emptied, window of one", window=1, block_q=4, block_k=7)
    holes.k_pos[[35, 37, 39]] = -1  # rows 1, 3, 5 lose the only key they could see
    early = ring(rng, 50, 300, 3, 8, "queries older than every stored key", block_q=2, block_k=16)
    early.q_pos = np.array([100, 260, 299], dtype=np.int64)  # the first sees nothing still stored
    late = ring(rng, 50, 300, 3, 8, "a query tile that loads nothing after one that did", block_q=2, block_k=16)
    late.q_pos = np.array([260, 299, 100], dtype=np.int64)  # the second tile's one row sees nothing: fresh state
    # T = 0: the contract sets no lower bound (section 1: a size of 0 is then allowed)
    none = [contiguous(rng, 0, odd_size(rng, 20, 60), 8, "no queries", block_q=4, block_k=7),
            ring(rng, 45, 130, 0, 8, "no queries, ring buffer, window", window=30, block_q=3, block_k=6, holes=5),
            contiguous(rng, 0, 0, 8, "no queries, no keys", window=5, block_q=3, block_k=4)]
    # S = 0 with queries: every row sees nothing (a blind answer's early exit gave lse = 0 there)
    no_keys = [contiguous(rng, odd_size(rng, 2, 9), 0, 8, "no keys", block_q=2, block_k=4),
               contiguous(rng, odd_size(rng, 2, 9), 0, 8, "no keys, window", window=3, block_q=3, block_k=5)]
    for case in no_keys:
        case.q_pos = np.sort(rng.integers(0, 50, case.T)).astype(np.int64)  # queries past an emptied cache
    for case in (empty, holes, early, late, *none, *no_keys):
        o, lse, _, _, warnings = run(ex, case, measured=True, memory=False)
        expect_outputs(ex, case, o, lse)
        if warnings:
            fail(f"{case.call_text()} raised numpy warnings: {'; '.join(warnings[:3])}; a row that sees "
                 "nothing must be handled without computing -inf - (-inf) or dividing by zero",
                 case.describe(ex.seed), kind="hygiene")


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    k, v = ex.rng.standard_normal((2, 4, 2))
    source = KVSource(k, v, np.arange(4))
    expect_rejected(ex, ex.candidate.flash_attention, np.ones((1, 2)), source, np.array([3]), window=0,
                    call="flash_attention(q [1, 2], KVSource(4 keys), [3], window=0)",
                    diagnosis="accepts_invalid_arguments", why=SHOWN)


def check_rejects_invalid_arguments(ex):
    """Malformed q (1-D, 3-D, ints), q_positions, window or block sizes raise ValueError."""
    rng = ex.rng
    good = contiguous(rng, 3, 20, 4, "contiguous")
    bad = [("q is 1-D", dict(q=good.q[0])),
           # shapes a lenient reading would fit to the other arguments (atleast_2d, squeeze, reshape(-1, D))
           ("q is 1-D, one query's D values beside one position", dict(q=good.q[-1], q_pos=good.q_pos[-1:])),
           ("q is 3-D [1, T, D]", dict(q=good.q[None])),
           ("q is 3-D [T, 1, D]", dict(q=good.q[:, None])),
           ("q holds ints", dict(q=np.ones((3, 4), dtype=np.int64))),
           ("q_positions has 2 entries for 3 rows", dict(q_pos=good.q_pos[:2])),
           ("q_positions has 1 entry for 3 rows (numpy would broadcast it)", dict(q_pos=good.q_pos[:1])),
           ("window = 0", dict(window=0)),
           ("window = -5", dict(window=-5)),
           ("block_q = 0", dict(block_q=0)),
           ("block_k = 0", dict(block_k=0)),
           ("block_k = 2.5", dict(block_k=2.5)),
           ("block_q = 4.0 (a float, though whole)", dict(block_q=4.0)),
           ("window = 4.0 (a float, though whole)", dict(window=4.0)),
           ("q_positions of whole floats", dict(q_pos=good.q_pos.astype(np.float64)))]
    decode = [(f"{what}, for one query (T = 1)", dict(q=good.q[-1:], q_pos=good.q_pos[-1:]) | change)
              for what, change in bad if set(change) <= {"window", "block_q", "block_k"}]  # every path validates
    for what, change in bad + decode:
        args = dict(q=good.q, q_pos=good.q_pos, window=None, block_q=4, block_k=8) | change
        source = KVSource(good.k, good.v, good.k_pos)
        expect_rejected(ex, ex.candidate.flash_attention, args["q"], source, args["q_pos"],
                        window=args["window"], block_q=args["block_q"], block_k=args["block_k"],
                        call=f"flash_attention with {what}", diagnosis="accepts_invalid_arguments",
                        why="a malformed call gives a silent answer or fails deep inside",
                        case={"T": 3, "S": 20, "D": 4, "problem": what})


