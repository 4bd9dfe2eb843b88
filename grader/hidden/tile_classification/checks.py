"""Hidden checks for tile_classification. Each ``check_*`` is one stable check id (without the prefix)."""
import numpy as np

from grader.checking import (SHOWN, CheckFailure, edge_windows, expect_array, expect_rejected, fail, grid_picture,
                             measure, name_mistakes, odd_size, other_argument_types, past_int64)
from grader.sandbox import RemoteObject

from . import diagnosis, oracle

LABELS = {"0": ".", "1": "/", "2": "#"}  # SKIP, PARTIAL, FULL in pictures
NAMES = {oracle.SKIP: "SKIP", oracle.PARTIAL: "PARTIAL", oracle.FULL: "FULL"}
DENSE_FRACTION = 4  # a peak of T * S / 4 bytes or more: something of the order of the T x S mask was built


class Case(tuple):
    """(T, S, block_q, block_k, window): one call of classify_tiles."""

    def __new__(cls, T, S, block_q, block_k, window=None):
        return super().__new__(cls, (int(T), int(S), int(block_q), int(block_k),
                                     None if window is None else int(window)))

    @property
    def grid_shape(self):
        T, S, block_q, block_k, _ = self
        return oracle.tile_count(T, block_q), oracle.tile_count(S, block_k)

    @property
    def call(self):
        T, S, block_q, block_k, window = self
        window_text = "" if window is None else f", window={window}"
        return f"classify_tiles({T}, {S}, {block_q}, {block_k}{window_text})"

    def details(self, seed):
        return dict(zip(("T", "S", "block_q", "block_k", "window"), self), seed=seed)


def _grid(ex, case, as_type=int):
    """The candidate's grid for ``case``, its sizes passed as ``as_type`` (numpy ints too)."""
    T, S, block_q, block_k, window = (None if x is None else as_type(x) for x in case)
    kwargs = {} if window is None else {"window": window}
    value = ex.candidate.classify_tiles(T, S, block_q, block_k, **kwargs)
    return expect_array(value, call=case.call, shape=case.grid_shape, kind="iu", case=case.details(ex.seed))


def _name(value):
    return NAMES.get(int(value), f"{int(value)} (not 0, 1 or 2)")


def _tile_text(case, a, b):
    T, S, block_q, block_k, _ = case
    rows, keys = oracle.tile_span(T, block_q, a), oracle.tile_span(S, block_k, b)
    return (f"tile ({a}, {b}): query rows {rows.start}..{rows.stop - 1} (positions "
            f"{S - T + rows.start}..{S - T + rows.stop - 1}), keys {keys.start}..{keys.stop - 1}")


def _expect_cases(ex, cases, context="", as_type=int):
    """Compare every case with the oracle; report the smallest failing one, which draws best, and
    name a mistake only when it explains every failing case."""
    failures, passes = [], []
    for case in cases:
        got, want = _grid(ex, case, as_type), oracle.classify_tiles(*case)
        if not np.array_equal(got, want):
            failures.append((case, want, got))
        else:
            passes.append(case)
    if not failures:
        return
    failures.sort(key=lambda f: (f[1].size, f[0][0] * f[0][1]))
    case, want, got = failures[0]
    a, b = (int(x) for x in np.argwhere(want != got)[0])
    message = (f"{case.call}{context} differs from the expected classification in "
               f"{int((want != got).sum())} of {want.size} tiles; first {_tile_text(case, a, b)}: "
               f"expected {_name(want[a, b])}, got {_name(got[a, b])}"
               + (f" ({len(failures)} of {len(cases)} cases wrong)" if len(cases) > 1 else ""))
    message += name_mistakes(ex, diagnosis.explain_grids([(c, g) for c, _, g in failures], passes))
    fail(message, case=case.details(ex.seed),
         picture=grid_picture(want, got, f"{case.call}: rows are query tiles, columns key tiles "
                                          "(. SKIP, / PARTIAL, # FULL)", labels=LABELS, keep_corner=True))


def random_cases(rng, count, max_s=160, window=None):
    """Random T > 1 over S keys, block sizes 3..24 that rarely divide T or S.

    ``window``: None, "small" (1 .. smaller block - 1) or "large" (larger block + 1 .. larger block + S + 8).
    """
    cases = []
    while len(cases) < count:
        S = odd_size(rng, 3, max_s)
        T = odd_size(rng, 2, S + 1)
        block_q, block_k = int(rng.integers(3, 25)), int(rng.integers(3, 25))
        W = None
        if window == "small":
            block_q, block_k = max(block_q, 4), max(block_k, 4)
            W = int(rng.integers(1, min(block_q, block_k)))
        elif window == "large":
            W = int(rng.integers(max(block_q, block_k) + 1, max(block_q, block_k) + S + 9))
        cases.append(Case(T, S, block_q, block_k, W))
    return cases


def check_dtype_and_shape(ex):
    """Returns an int array of shape [ceil(T / block_q), ceil(S / block_k)], ragged tiles counted."""
    for case in [Case(1, 1, 1, 1), Case(3, 7, 2, 3), Case(6, 6, 4, 4), Case(2, 97, 1, 16),
                 Case(45, 67, 8, 16), Case(5, 130, 64, 128, window=7)]:
        _grid(ex, case)


def check_exposes_labels(ex):
    """The module defines SKIP, PARTIAL, FULL = 0, 1, 2: ints, an int subclass's instances (an IntEnum's members)
    included, read by their int value; bools are not labels."""
    got = tuple(_int_value(ex, getattr(ex.candidate, name)) for name in ("SKIP", "PARTIAL", "FULL"))
    if got != (0, 1, 2) or any(isinstance(v, bool) for v in got):
        fail(f"SKIP, PARTIAL, FULL are {got!r}; expected 0, 1, 2")


def _int_value(ex, label):
    """``label`` as read off the module: an instance of an int subclass stays in the child (the wire carries plain
    ints only) and is read there by operator.index, which takes an int's own value without running any method of
    the subclass (its __index__, __int__ or __eq__); anything else as it came."""
    if not isinstance(label, RemoteObject):
        return label
    builtins = ex.helper("builtins")
    kind = builtins.type(label)  # type() cannot be forged, isinstance's __class__ can
    if builtins.issubclass(kind, builtins.int) and not builtins.issubclass(kind, builtins.bool):
        return ex.helper("operator").index(label)
    return label


def check_aligned_tiles(ex):
    """T > 1 with block sizes that divide T and S exactly, no window."""
    rng, cases = ex.rng, [Case(12, 48, 4, 8), Case(20, 60, 5, 3), Case(24, 36, 6, 6)]
    while len(cases) < 10:
        block_q, block_k = int(rng.integers(2, 10)), int(rng.integers(2, 13))
        T = block_q * int(rng.integers(1, 8))
        S = block_k * int(rng.integers(1, 12))
        if 1 < T <= S:
            cases.append(Case(T, S, block_q, block_k))
    _expect_cases(ex, cases)


def check_ragged_tiles(ex):
    """Block sizes that divide neither T nor S: the last query tile and the last key tile are short."""
    cases = [Case(45, 67, 8, 16), Case(97, 130, 10, 12), Case(7, 100, 3, 9), Case(13, 13, 5, 6)]
    for case in random_cases(ex.rng, 60):
        T, S, block_q, block_k, _ = case
        if T % block_q and S % block_k and len(cases) < 24:
            cases.append(case)
    _expect_cases(ex, cases)


def check_plain_decode(ex):
    """T = 1: one query after a cache of S keys, in tiles of every size."""
    cases = [Case(1, 1, 1, 1), Case(1, 37, 1, 8), Case(1, 130, 4, 12), Case(1, 4099, 1, 128),
             Case(1, 1000, 64, 96)]
    cases += [Case(1, odd_size(ex.rng, 2, 3000), 16, int(ex.rng.integers(3, 200))) for _ in range(4)]
    _expect_cases(ex, cases, context=" (plain decode)")


def check_prefill(ex):
    """T = S: prefill from an empty cache, equal and unequal tile sizes."""
    _expect_cases(ex, [Case(5, 5, 2, 2), Case(31, 31, 4, 4), Case(97, 97, 8, 8), Case(130, 130, 16, 12),
                       Case(45, 45, 7, 5), Case(67, 67, 3, 10)], context=" (prefill)")


def check_random_shapes(ex):
    """Random T > 1 over S keys and tile sizes, not powers of two, match the element mask."""
    _expect_cases(ex, random_cases(ex.rng, 40))


def check_window_smaller_than_tile(ex):
    """Sliding windows narrower than a tile (down to W = 1): W keys per query, itself included; and
    windows narrower than block_q but wider than block_k, where a query tile of fewer rows (decode, a
    ragged last tile) still sees whole key tiles."""
    rng = ex.rng
    cases = [Case(9, 40, 4, 8, window=1), Case(1, 50, 1, 8, window=3), Case(20, 61, 6, 5, window=4),
             Case(1, 1000, 64, 8, window=32), Case(6, 6, 5, 1, window=3)]
    for _ in range(6):
        W = int(rng.integers(3, 40))
        block_q, block_k = W + int(rng.integers(1, 30)), int(rng.integers(1, W + 1))
        T = block_q * int(rng.integers(0, 3)) + int(rng.integers(1, W + 1))  # its last tile: at most W rows
        cases.append(Case(T, T + int(rng.integers(0, 500)), block_q, block_k, window=W))
    _expect_cases(ex, cases + random_cases(ex.rng, 22, window="small"), context=" (sliding window)")


def check_window_larger_than_tile(ex):
    """Sliding windows wider than a tile, up to wider than the whole sequence; and windows at the sequence's edges,
    where the first or the last query just sees, or just misses, key 0 (sizes one apart around S)."""
    cases = [Case(1, 300, 1, 16, window=50), Case(33, 200, 8, 16, window=37), Case(10, 30, 4, 4, window=30),
             Case(64, 97, 9, 11, window=200)]
    _expect_cases(ex, cases + random_cases(ex.rng, 22, window="large") + _edge_windows(ex.rng),
                  context=" (sliding window)")


def _edge_windows(rng) -> list:
    """Cases whose window is one of the sizes where key 0 enters or leaves the first or the last query's view."""
    cases = []
    for _ in range(4):
        S = odd_size(rng, 5, 200)
        T, block_q, block_k = int(rng.integers(1, S + 1)), int(rng.integers(1, 70)), int(rng.integers(1, 140))
        cases += [Case(T, S, block_q, block_k, window=W) for W in edge_windows(S, T)]
    return cases


def _sample_tiles(rng, case, count=100):
    """Tiles worth brute-forcing in a large grid: near each boundary, the edges, and random ones."""
    T, S, block_q, block_k, window = case
    nq, nk = case.grid_shape
    tiles = {(0, 0), (nq - 1, nk - 1), (0, nk - 1), (nq - 1, 0)}
    for a in range(nq):
        rows = oracle.tile_span(T, block_q, a)
        first, last = S - T + rows.start, S - T + rows.stop - 1  # positions of the tile's queries
        edges = [first, last] + ([] if window is None else [first - window, last - window + 1])
        for position in edges:
            for b in range(position // block_k - 1, position // block_k + 2):
                if 0 <= b < nk:
                    tiles.add((a, b))
    tiles.update(zip(rng.integers(0, nq, count).tolist(), rng.integers(0, nk, count).tolist()))
    return sorted(tiles)


def check_huge_sizes(ex):
    """Sizes past 2^31, 2^53 and 2^62 with blocks as large (a small grid), every tile from the tiles' bounds in
    Python ints; windows int64 holds (up to 2^63 - 1) over small positions, whose sum with a key passes it, judged
    like any size; then sizes whose sums pass int64 (S = 2^63 - 1, windows past 2^63, windows of 2^62 over
    positions past 2^62), where a failure is hygiene."""
    rng = ex.rng
    def odd(n):
        return n + int(rng.integers(1, 1000)) * 2 + 1
    _expect_bounds(ex, [Case(3, odd(2**31), 2, 2**29), Case(5, odd(2**60), 4, 2**58, window=odd(2**59)),
                        Case(2, odd(2**62), 1, 2**60, window=odd(2**61)), Case(7, 9 * 2**53 + 1, 3, 2**53)])
    past = [Case(3, 100, 2, 16, window=2**63 + 5), Case(4, odd(2**40), 3, 2**38, window=2**70),
            Case(1, 2**63 - 1, 1, 2**62), Case(3, 2**63 - odd(0), 2, 2**61, window=odd(2**62))]
    held, unreal = _windows_int64_holds(rng, odd)
    _expect_bounds(ex, held)  # before the past-int64 cases: a failure here is wrong
    with past_int64("sizes past int64"):  # a tile's end (first + block) or a key plus a window past 2^63
        _expect_bounds(ex, past + unreal)


def _windows_int64_holds(rng, odd):
    """Windows that fit in int64 but a key plus the window does not. Over positions a model reaches, a
    window up to 2^63 - 1 (sys.maxsize, Python's "no limit") is judged like any size: an answer that adds
    it to a key in int64 wraps on an input section 1 allows (weak). Over positions past 2^62 the same sum
    is one more size past int64 (the second list: hygiene, as ring_buffer_window's)."""
    top, S = 2**63 - 1, odd_size(rng, 20, 60)
    held = [Case(5, 40, 4, 8, window=top), Case(3, S, 2, 7, window=top - int(rng.integers(0, S))),
            Case(1, S, 1, 5, window=2**63 - int(rng.integers(1, S + 1))), Case(4, S, 3, 6, window=2**63 - S)]
    unreal = [Case(4, odd(2**62), 3, 2**60, window=odd(2**62)),  # the window wider than S, a key plus it past 2^63
              Case(3, odd(3 * 2**61), 2, 2**60, window=odd(2**62))]  # narrower than S: it cuts, and still wraps
    return held, unreal


def _expect_bounds(ex, cases):
    """Every tile of each case against the oracle's tile bounds in Python ints."""
    for case in cases:
        got = _grid(ex, case)
        want = np.array([[oracle.classify_tile_by_bounds(*case[:4], a, b, case[4]) for b in range(case.grid_shape[1])]
                         for a in range(case.grid_shape[0])])
        if not np.array_equal(got, want):
            a, b = (int(i) for i in np.argwhere(got != want)[0])
            fail(f"{case.call} is wrong in {int((got != want).sum())} of {want.size} tiles; first "
                 f"{_tile_text(case, a, b)}: expected {_name(want[a, b])}, got {_name(got[a, b])} (sizes may be as "
                 "large as the grid allows: Python ints hold them; float64, int32 and int64 sums do not)",
                 case=case.details(ex.seed))


def check_large_context(ex):
    """S in the hundreds of thousands, T x S past 2^31: sampled tiles, brute-forced from positions, are right."""
    rng = ex.rng
    S = odd_size(rng, 200_000, 300_000)
    window = int(rng.integers(1000, 9000))
    for case in [Case(515, S, 64, 128), Case(1, S, 64, 128), Case(333, S, 64, 128, window=window),
                 Case(1, S, 16, 96, window=4095), Case(odd_size(rng, 9_000, 12_000), S, 128, 256, window=window)]:
        got = _grid(ex, case)
        tiles = _sample_tiles(rng, case)
        T, S, block_q, block_k, W = case
        wrong = [(a, b, want) for a, b in tiles
                 if (want := oracle.classify_tile(T, S, block_q, block_k, a, b, W)) != got[a, b]]
        if wrong:
            a, b, want = wrong[0]
            fail(f"{case.call} is wrong in {len(wrong)} of {len(tiles)} tiles brute-forced from "
                 f"positions; first {_tile_text(case, a, b)}: expected {_name(want)}, got {_name(got[a, b])}"
                 + name_mistakes(ex, diagnosis.explain_grids([(case, got)])), case=case.details(ex.seed))


def _dense_cases(rng):
    """Every path of the classification, each big enough that a T x S mask shows in the peak."""
    S = odd_size(rng, 200_000, 300_000)
    return [Case(1031, S, 64, 128), Case(1031, S, 64, 128, window=int(rng.integers(500, 3000))),
            Case(odd_size(rng, 700, 1000), S, 1024, 128),  # T < block_q: a single query tile
            Case(odd_size(rng, 1000, 1500), S, 37, 1000, window=1)]


def _expect_sampled_tiles(ex, case, grid, count=64):
    """``count`` tiles of ``grid`` drawn at random (corners included) match the oracle."""
    rows, cols = grid.shape
    picks = {(0, 0), (rows - 1, cols - 1)} | {(int(ex.rng.integers(rows)), int(ex.rng.integers(cols)))
                                               for _ in range(count)}
    for a, b in sorted(picks):
        want = oracle.classify_tile(*case[:4], a, b, case[4])
        if int(grid[a, b]) != want:
            fail(f"{case.call}: tile ({a}, {b}) is {int(grid[a, b])}, expected {want}", case=case.details(ex.seed))


def check_no_dense_mask(ex):
    """Chunks over hundreds of thousands of keys, with and without a window, one query tile or many:
    peak memory stays far below T x S bytes."""
    for case in _dense_cases(ex.rng):
        T, S = case[:2]
        kwargs = {} if case[4] is None else {"window": case[4]}
        try:
            value, peak, _ = measure(ex, ex.candidate, "classify_tiles", *case[:4], **kwargs)
        except CheckFailure as failure:  # out of memory: the allocation itself was the mistake
            if failure.kind != "must_not":
                raise
            ex.diagnose("dense_mask_built", f"{case.call} ran out of memory: a {T:,} x {S:,} mask alone "
                                            f"is {T * S / 2**20:,.0f} MiB; compare tile edges instead")
            raise failure
        grid = expect_array(value, call=case.call, shape=case.grid_shape, kind="iu", case=case.details(ex.seed))
        _expect_sampled_tiles(ex, case, grid)  # the measured answer counts like any other
        if peak is not None and peak >= T * S / DENSE_FRACTION:
            ex.diagnose("dense_mask_built",
                        f"{case.call} allocated up to {peak / 2**20:,.0f} MiB, of the order of the {T:,} x {S:,} "
                        f"element mask ({T * S / 2**20:,.0f} MiB as bools) for a grid of only "
                        f"{case.grid_shape[0]} x {case.grid_shape[1]} tiles: classify from the tile edges")
            fail(f"{case.call} peaked at {peak:,} bytes; a classification from tile edges needs far less than "
                 f"T x S / {DENSE_FRACTION} = {T * S // DENSE_FRACTION:,} bytes", case=case.details(ex.seed),
                 kind="must_not")


def check_every_argument_counts(ex):
    """Calls that differ in one argument only, interleaved and repeated, each get their own answer."""
    T = odd_size(ex.rng, 9, 40)
    S = T + odd_size(ex.rng, 9, 80)
    block_q, block_k = int(ex.rng.integers(3, T // 2)), int(ex.rng.integers(3, 8))
    W = int(ex.rng.integers(block_k + 1, S))
    base = Case(T, S, block_q, block_k, W)
    # a tile count changes with each size, so an answer kept from a call with another size is visibly stale
    cases = [base, Case(T, S, block_q, block_k), Case(T, S, T, block_k, W), Case(T, S, block_q, S, W),
             Case(max(1, T - 1), S, block_q, block_k, W),
             Case(T, S + 3, block_q, block_k, W), Case(T, S, block_q, block_k, max(1, W // 2)), base]
    _expect_cases(ex, cases, context=" (after calls that differ in one argument)")


def check_numpy_integer_arguments(ex):
    """Sizes and window given as numpy integers (np.int64, np.int32) work like Python ints."""
    cases = [Case(7, 45, 3, 8), Case(1, 97, 4, 10, window=9), Case(20, 61, 6, 5, window=4)]
    _expect_cases(ex, cases)  # a wrong answer with plain ints is blamed as such, never on the argument type
    with other_argument_types("classify_tiles rejected int64 sizes"):  # numpy integers refused as such: a slip
        _expect_cases(ex, cases, context=" (sizes as int64)", as_type=np.int64)
    for as_type in (np.int8, np.int16, np.int32):  # once int64 works, a narrow dtype that fails is a wrong answer
        _expect_cases(ex, cases, context=f" (sizes as {as_type.__name__})", as_type=as_type)


def _expect_rejected(ex, args, kwargs, why):
    shown = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"classify_tiles({', '.join(shown)})"
    expect_rejected(ex, ex.candidate.classify_tiles, *args, call=text, diagnosis="accepts_invalid_arguments",
                    why=why, case={"call": text}, **kwargs)


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    _expect_rejected(ex, (5, 4, 2, 2), {}, f"T > S: {SHOWN}")


def _on_every_path(cases):
    """Each case whose T and S are valid, also with T = 1 (decode) and T = S (prefill): a shortcut
    for those shapes must validate the other arguments too."""
    more = []
    for (T, S, *blocks), kwargs, why in cases:
        if type(T) is int and type(S) is int and 1 <= T <= S:
            more += [((1, S, *blocks), kwargs, f"{why}, at T = 1"), ((S, S, *blocks), kwargs, f"{why}, at T = S")]
    return cases + more


def check_rejects_invalid_sizes(ex):
    """T, S or a block size below 1, T > S, or a window below 1 raise ValueError (at T = 1 and T = S too)."""
    for args, kwargs, why in _on_every_path([
            ((0, 5, 4, 4), {}, "T < 1"), ((6, 5, 4, 4), {}, "T > S"), ((-2, 4, 2, 2), {}, "T < 1"),
            ((1, 0, 4, 4), {}, "T > S and S < 1"), ((3, 8, 0, 4), {}, "block_q < 1"), ((3, 8, 4, 0), {}, "block_k < 1"),
            ((3, 8, -4, 4), {}, "block_q < 1"), ((3, 8, 4, 4), {"window": 0}, "window < 1"),
            ((3, 8, 4, 4), {"window": -3}, "window < 1"), ((6, 5, 4, 4), {"window": 3}, "T > S, with a window")]):
        _expect_rejected(ex, args, kwargs, why)


def check_rejects_non_integers(ex):
    """Floats and strings as sizes or window raise ValueError (at T = 1 and T = S too)."""
    for args, kwargs, why in _on_every_path([
            ((3.0, 8, 4, 4), {}, "T is a float"), ((3, "8", 4, 4), {}, "S is a string"),
            ((3, 8, 2.5, 4), {}, "block_q is a float"), ((3, 8, 4, 4), {"window": 2.5}, "window is a float"),
            ((3, 8, 4, 4), {"window": np.float64(4.0)}, "window is a float, integral")]):
        _expect_rejected(ex, args, kwargs, why)


def integer_edges():
    """Calls whose sizes reach the top of int8, int16 and int32 (tile ends, S - T + row, row +
    window), for the general integer-type check; and calls where a small size or window (int8, int16 as
    the check retypes each int alone) meets positions far past its dtype (S - T, p - window): Python ints
    in the answer's arithmetic do not fit that dtype."""
    shapes = [(9, 300, 4, 100, 100), (3, 40_000, 64, 1024, 4096), (200, 70_000, 100, 30_000, 120),
              (5, 127, 2, 16, None), (5, 127, 2, 16, 100), (127, 127, 16, 16, 9), (3, 32767, 2, 512, 1000),
              (100, 127, 100, 64, None), (100, 127, 100, 64, 120), (30000, 32000, 20000, 16000, None),
              (30000, 32000, 20000, 16000, 25000), (32767, 32767, 32767, 32767, 32767),
              (3, 2**31 - 1, 2, 2**30, None), (3, 2**31 - 1, 2, 2**30, 2**31 - 2)]
    return [("classify_tiles", (T, S, bq, bk), {"window": w}) for T, S, bq, bk, w in shapes]
