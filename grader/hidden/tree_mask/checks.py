"""Hidden checks for tree_mask. Each ``check_*`` is one stable check id (without the prefix)."""
import numpy as np

from grader.checking import (SHOWN, error_of, expect_array, expect_raises, expect_rejected, fail, grid_picture,
                             name_mistakes, odd_size, other_argument_types, same_bytes)
from grader.hidden.decode_mask import oracle as decode_oracle
from grader.sandbox import CandidateRaised, CandidateTimeout

from . import diagnosis, oracle

SHOWN_PARENTS = 40  # trees up to this size are written out in full in a failure's case


# -- trees ------------------------------------------------------------------------------------


def random_tree(rng, T: int) -> list[int]:
    """Topologically ordered parents with at least two roots (T >= 2), deep and bushy parts."""
    parents = [-1]
    for i in range(1, T):
        draw = rng.random()
        if draw < 0.15:
            parents.append(-1)
        elif draw < 0.6:
            parents.append(int(i - rng.integers(1, min(i, 3) + 1)))  # a recent draft: depth grows
        else:
            parents.append(int(rng.integers(0, i)))
    if T >= 2 and parents.count(-1) < 2:
        parents[int(rng.integers(1, T))] = -1
    return parents


def chain(T: int) -> list[int]:
    return [-1] + list(range(T - 1))


def deep_path(rng, T: int) -> list[int]:
    """A long main branch, with side branches sprouting anywhere (some from the cache)."""
    parents, tip = [], -1
    for i in range(T):
        if rng.random() < 0.85:
            parents.append(tip)
            tip = i
        else:
            parents.append(int(rng.integers(-1, i)))
    return parents


def random_cases(rng, count: int, max_t: int = 130) -> list[tuple[list[int], int]]:
    """(parents, P): the sizes 7, 13 and 37, then random sizes that are not powers of two."""
    sizes = [7, 13, 37] + [odd_size(rng, 3, max_t) for _ in range(count - 3)]
    caches = [0, 45, 97] + [int(rng.integers(1, 300)) for _ in range(count - 3)]
    return [(random_tree(rng, T), P) for T, P in zip(sizes, caches)]


# -- calling the candidate ----------------------------------------------------------------------


def _case(ex, parents, P) -> dict:
    case = {"T": len(parents), "P": int(P), "seed": ex.seed}
    if len(parents) <= SHOWN_PARENTS:
        case["parents"] = [int(p) for p in parents]
    return case


def _call(name, parents, P) -> str:
    shown = [int(p) for p in parents] if len(parents) <= 16 else f"<{len(parents)} parents>"
    as_array = f"{parents.dtype} array " if isinstance(parents, np.ndarray) else ""  # same values, another dtype
    return f"{name}({as_array}{shown}, {P})"


def _positions(ex, parents, P, as_given=None):
    """The candidate's positions for ``parents`` (sent as ``as_given`` when not a list)."""
    call, case = _call("tree_positions", parents, P), _case(ex, parents, P)
    got = ex.candidate.tree_positions(parents if as_given is None else as_given, P)
    return expect_array(got, call=call, shape=(len(parents),), kind="i", case=case)


def _mask(ex, parents, P, as_given=None):
    call, case = _call("tree_attention_mask", parents, P), _case(ex, parents, P)
    got = ex.candidate.tree_attention_mask(parents if as_given is None else as_given, P)
    return expect_array(got, call=call, shape=(len(parents), int(P) + len(parents)), kind="b", case=case)


def _mask_picture(want, got, P, call):
    """The T x T draft corner when it differs, else the whole mask (then it is the cache part)."""
    if not np.array_equal(want[:, P:], got[:, P:]):
        return grid_picture(want[:, P:], got[:, P:],
                            f"{call}, draft corner: row i and column j are draft i and draft j")
    return grid_picture(want, got, f"{call}: rows are drafts, columns the {P} cached keys then the drafts",
                        keep_corner=True)


def _column(c, P):
    return f"cached key {c}" if c < P else f"draft {c - P} (column {c})"


def _fail_mask(ex, failures, context=""):
    (parents, P), want, got = failures[0]
    call = _call("tree_attention_mask", parents, P)
    row, col = (int(x) for x in np.argwhere(want != got)[0])
    message = (f"{call}{context} differs from the expected mask in {int((want != got).sum()):,} of "
               f"{want.size:,} cells (first at draft row {row}, {_column(col, P)}: expected "
               f"{bool(want[row, col])}; draft {row} sees {_keys(int(got[row].sum()))}, expected "
               f"{int(want[row].sum()):,})")
    message += name_mistakes(ex, diagnosis.explain_answers("mask", [(c, g) for c, _, g in failures]))
    fail(message, case=_case(ex, parents, P), picture=_mask_picture(want, got, P, call))


def _keys(n: int) -> str:
    return f"{n:,} key" if n == 1 else f"{n:,} keys"


def _fail_positions(ex, failures, context=""):
    (parents, P), want, got = failures[0]
    call = _call("tree_positions", parents, P)
    i = int(np.flatnonzero(want != got)[0])
    message = (f"{call}{context} gives {int((want != got).sum())} of {len(parents)} positions wrong "
               f"(first: draft {i} at {int(got[i]):,}, expected {int(want[i]):,})")
    message += name_mistakes(ex, diagnosis.explain_answers("positions", [(c, g) for c, _, g in failures]))
    fail(message, case=_case(ex, parents, P))


ANSWERS = {  # what is compared: (candidate call, oracle, failure report)
    "mask": (_mask, oracle.mask, _fail_mask),
    "positions": (_positions, oracle.positions, _fail_positions),
}


def _expect(ex, cases, kinds=("mask", "positions"), context="", given=None, want=None):
    """Check each kind on every (parents, P); report the smallest failing case, and name a
    mistake only when it explains every failing case.

    ``given`` sends the parents in another form than a list; ``want(kind, parents, P)``
    replaces the oracle (for an independent statement such as the decode mask of a chain).
    """
    for kind in kinds:
        call, right, report = ANSWERS[kind]
        failures = []
        for parents, P in cases:
            got = call(ex, parents, P, given)
            plain = [int(x) for x in parents]  # the oracle works in Python ints, whatever was sent
            expected = want(kind, plain, int(P)) if want else right(plain, int(P))
            if not np.array_equal(got, expected):
                failures.append(((parents, int(P)), expected, got))
        if failures:
            failures.sort(key=lambda f: (len(f[0][0]), f[0][1]))
            report(ex, failures, context)


# -- checks -------------------------------------------------------------------------------------


def check_dtype_and_shape(ex):
    """Positions are an integer array [T]; the mask is a bool array [T, P + T]."""
    for parents, P in [([-1], 0), ([-1, 0, 0], 4), (random_tree(ex.rng, 11), 97)]:
        _positions(ex, parents, P)
        _mask(ex, parents, P)


def check_positions_are_int64(ex):
    """Positions are int64, as the signature says, whatever integer type the parents came in."""
    for given in ([-1, 0, 1, -1], np.array([-1, 0, 1, -1], dtype=np.int32)):
        got = _positions(ex, [-1, 0, 1, -1], 7, given)
        if got.dtype != np.int64:
            fail(f"tree_positions({given!r}, 7) returned {got.dtype} positions; expected int64",
                 case={"parents": [-1, 0, 1, -1], "P": 7}, kind="hygiene")


def check_positions_random_trees(ex):
    """Positions of random trees (7, 13, 37 drafts and more, several roots)."""
    _expect(ex, random_cases(ex.rng, 14), kinds=["positions"])


def check_mask_random_trees(ex):
    """Masks of random trees (7, 13, 37 drafts and more, several roots)."""
    _expect(ex, random_cases(ex.rng, 14), kinds=["mask"])


def check_chain_is_plain_decoding(ex):
    """A chain of drafts gives exactly the decode mask and positions P .. P + T - 1."""
    def plain_decoding(kind, parents, P):
        T = len(parents)
        return decode_oracle.causal_mask(T, P + T) if kind == "mask" else P + np.arange(T)

    cases = [(chain(T), P) for T, P in [(2, 0), (5, 3), (13, 97), (37, 1000),
                                         (int(ex.rng.integers(40, 120)) | 1, 45)]]
    _expect(ex, cases, context=" (a chain: plain decoding)", want=plain_decoding)


def check_stars(ex):
    """Stars: many roots side by side, or one root with many children."""
    cases = []
    for T, P in [(9, 5), (31, 0), (int(ex.rng.integers(40, 100)) | 1, 131)]:
        cases += [([-1] * T, P), ([-1] + [0] * (T - 1), P)]
    _expect(ex, cases, context=" (a star)")


def check_deep_paths(ex):
    """Deep paths with side branches after a long cache (depths in the hundreds)."""
    cases = [(deep_path(ex.rng, 61), 4099), (deep_path(ex.rng, 250), 10), (chain(199) + [-1, 0, 197], 2)]
    _expect(ex, cases, context=" (a deep path)")


DEEP_CHAIN = (10_500, 12_000)  # past the recursion limits answers commonly raise Python's to (10,000)
DEEP_CHAIN_SECONDS = 60.0  # a correct per-node walk to the root, O(T * depth), takes ~7 s here at 12,000


def check_chains_thousands_deep(ex):
    """Chains of thousands of drafts (positions past 10,000 deep): as deep as memory allows, with no limit on
    recursion."""
    T = odd_size(ex.rng, 2500, 3500)
    deep = odd_size(ex.rng, *DEEP_CHAIN)
    with ex.sandbox.patient(DEEP_CHAIN_SECONDS):
        _expect(ex, [(chain(deep), odd_size(ex.rng, 3, 50))], kinds=("positions",),
                context=" (a chain thousands deep)")
    _expect(ex, [(chain(T // 2) + [T // 2 - 1, 0], 1)], kinds=("mask",), context=" (a chain thousands deep)")


def check_every_argument_counts(ex):
    """Trees of one size with other shapes, and one tree after other cache lengths, each get their own answer;
    so do parents arrays that hold the same bytes in another dtype (a list beside an int32 array twice as
    long, int16 beside int8, int32 beside int16, int64 beside int8), the wider or the narrower asked first."""
    T = odd_size(ex.rng, 6, 14)
    first, other = random_tree(ex.rng, T), chain(T)
    P = odd_size(ex.rng, 3, 40)
    _expect(ex, [(first, P), (other, P), (first, P + 5), (other, 0), (first, P)],
            context=" (after calls that differ in one argument)")
    twins = [same_bytes(random_tree(ex.rng, T), wide, narrow)  # the narrow one a valid tree: parents under 128
             for wide, narrow in ((np.int64, np.int32), (np.int16, np.int8), (np.int32, np.int16), (np.int64, np.int8))]
    twins[0] = ([int(p) for p in twins[0][0]], twins[0][1])  # a list is read as int64: its bytes are the int32's
    pairs = [pair if n % 2 == 0 else pair[::-1] for n, pair in enumerate(twins)]  # both orders
    _expect(ex, [(parents, P) for pair in pairs for parents in pair],
            context=" (right after a call whose parents hold the same bytes in another dtype)")


def check_tree_attention_matches_path_decoding(ex):
    """Attention with your mask and positions (rotary) equals decoding each branch after the cache."""
    rng = ex.rng
    cases = [(random_tree(rng, 13), 37), (random_tree(rng, 7), 0), (random_tree(rng, 37), 45),
             ([-1] * 5 + [0, 1, 2], 11), (deep_path(rng, 29), 23)]
    for parents, P in cases:
        T, width, D = len(parents), int(rng.integers(5, 30)), 2 * int(rng.integers(2, 12))
        layer = oracle.random_layer(rng, width, D)
        cache_x, draft_x = rng.standard_normal((P, width)), rng.standard_normal((T, width))
        mask, positions = _mask(ex, parents, P), _positions(ex, parents, P)
        want = oracle.path_decoding(layer, cache_x, draft_x, parents)
        got = oracle.tree_attention(layer, cache_x, draft_x, mask, positions)
        error = error_of(got, want, axis=1)  # [T]
        if error.max() <= 1e-9:  # BLAS may sum in another order: equal up to rounding
            continue
        worst = int(error.argmax())
        message = (f"with your mask and positions, one attention step over {P} cached and {T} draft "
                   f"tokens (rotary, D = {D}) differs from decoding each branch after the cache by up to "
                   f"{error.max():.3g}, worst at draft {worst} (branch {oracle.path_to(parents, worst)})")
        if not np.isfinite(got).all():
            message += "; a draft that sees no key gives NaN"
        for kind, answer in (("mask", mask), ("positions", positions)):
            if not np.array_equal(answer, ANSWERS[kind][1](parents, P)):
                told = name_mistakes(ex, diagnosis.explain_answers(kind, [((parents, P), answer)]))
                message += f"; your {kind}: " + (told[2:] or "not what the rule gives")
        fail(message, case=_case(ex, parents, P) | {"D": D}, kind="wrong" if np.isfinite(got).all() else "nan")


def check_parents_as_numpy_array(ex):
    """Parents given as a numpy int array (int64, int32, or int8 where depths pass int8's top) or a tuple
    work like a list."""
    parents, P = random_tree(ex.rng, 23), 17
    for given, kind in [(np.array(parents, dtype=np.int64), "an int64 array"),
                        (np.array(parents, dtype=np.int32), "an int32 array"), (tuple(parents), "a tuple")]:
        _expect(ex, [(parents, P)], context=f" (parents given as {kind})", given=given)
    # (int16's twin, a chain of 2^15 + 1, would cost a correct answer that walks up each draft T^2 / 2 steps)
    deep = chain(129)  # parents up to 127 fit int8; depth 128 does not
    _expect(ex, [(deep, 5)], context=" (parents given as an int8 array)", given=np.array(deep, dtype=np.int8))


def check_long_cache(ex):
    """Caches past 2^15 and 2^16 tokens (masks), and positions past 2^31 and 2^53 (int64; a float
    holds every integer only up to 2^53), where no mask could fit in memory but the positions do."""
    rng = ex.rng
    trees = [random_tree(rng, 13), deep_path(rng, 40), chain(5)]
    _expect(ex, [(trees[0], odd_size(rng, 2**15 + 1, 2**16)), (trees[1], odd_size(rng, 70_000, 100_000))],
            context=" (a long cache)")
    try:
        _expect(ex, [(t, 2**31 + odd_size(rng, 1, 1000)) for t in trees] + [(trees[1], 2**32 - 20)]
                + [(trees[0], 2**53 + odd_size(rng, 1, 1000)), (trees[1], 2**62 + odd_size(rng, 1, 1000))],
                kinds=["positions"], context=" (positions past 2^31 and 2^53)")
    except CandidateRaised as exc:
        if not (exc.is_a("MemoryError") or exc.bound):
            raise
        # Section 1: sizes may be as large as memory allows for the answer itself; tree_positions
        # answers T int64s, so a cache far longer than any [T, P + T] mask is a valid call for it
        fail(f"{exc}; tree_positions answers T int64 values, and section 1 lets a length such as P be as large "
             "as memory allows for the answer itself: positions must not need memory that grows with P (such as "
             "the [T, P + T] mask)", kind="crash")


def check_numpy_integer_cache_length(ex):
    """P given as a numpy integer of any signed type, parents as numpy ints or an int8 array."""
    parents = random_tree(ex.rng, 11)
    wide = [(parents, np.int64(45)), ([np.int64(p) for p in parents], np.int64(0))]
    narrow = [(parents, np.int32(7)), (np.asarray(parents, np.int8), np.int16(300))]
    _expect(ex, [(parents, 45), (parents, 7), (parents, 0), (parents, 300)])  # wrong with plain ints: said as such
    with other_argument_types("a numpy integer P or parent was rejected"):
        _expect(ex, wide, context=" (numpy integers)")
    _expect(ex, narrow, context=" (numpy integers of narrow dtypes, where int64 works)")


def check_empty_tree(ex):
    """No drafts: positions of shape [0] and a mask of shape [0, P]."""
    for given, P in [([], 0), ([], 5), (np.array([], dtype=np.int64), 97)]:
        _positions(ex, [], P, given)
        _mask(ex, [], P, given)


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    expect_rejected(ex, ex.candidate.tree_attention_mask, [-1, 1], 3, call="tree_attention_mask([-1, 1], 3)",
                    diagnosis="accepts_invalid_parents", why=SHOWN)


def check_rejects_invalid_cache_length(ex):
    """P negative or not an int (an integral float too) raises ValueError, with drafts and with none."""
    for parents, P in [([-1, 0], -1), ([-1, 0], -7), ([-1, 0], 2.5), ([-1, 0], None), ([-1, 0], 4.0),
                       ([], -1), ([], 2.5)]:
        for name in ("tree_positions", "tree_attention_mask"):
            call = f"{name}({parents}, {P!r})"
            expect_raises(getattr(ex.candidate, name), parents, P, call=call, case={"P": repr(P)})


INVALID_PARENTS = [  # (parents, what is wrong); a draft that is its own parent last: walks may hang
    ([-1, -2, 0], "parents[1] = -2 is below -1"),
    ([-1, 0, 7], "parents[2] = 7 is past the last of 3 drafts"),
    ([-1, 2, -1, 1], "parents[1] = 2 is a later draft"),
    ([-1, 0, 1, 1, 2.5, 0, 5, 6, 3], "parents[4] = 2.5 is not an integer"),
    (np.array([-1.0, 0.0, 0.0, 2.0, 1.0, 4.0, 4.0, 3.0, 7.0]), "parents are a float array (of whole numbers)"),
    ([-1, 0, 1, 1, 3.0, 0, 5, 6, 3], "parents[4] = 3.0 is a float (of a whole number), not an int"),
    (np.array([[-1, 0, 1, 1, 3, 0, 5, 6, 2]]), "parents are a 2-D array, not a one-dimensional one"),
    ([-1, 0, 2**63], "parents[2] = 2^63 is past the last of 3 drafts (and past int64)"),
    ([-1, -2**63 - 1, 0], "parents[1] = -2^63 - 1 is below -1 (and past int64)"),
    ([-1, 0, 2], "parents[2] = 2 is the draft itself"),
]


def check_rejects_invalid_parents(ex):
    """A parent that is the draft itself, a later draft, below -1, out of range (past int64 too: a Python int
    any size) or not an int (a float, a whole float too; a 2-D array) raises ValueError."""
    for parents, wrong in INVALID_PARENTS:
        for name in ("tree_positions", "tree_attention_mask"):
            call, case = f"{name}({parents}, 3)", {"parents": parents, "P": 3}
            try:
                expect_rejected(ex, getattr(ex.candidate, name), parents, 3, call=call, case=case,
                                diagnosis="accepts_invalid_parents",
                                why=f"{wrong}, and a parent must be -1 or an earlier index, or the tree is not a tree")
            except CandidateTimeout:
                ex.diagnose("accepts_invalid_parents",
                            f"{call} never returned ({wrong}): walking up the parents loops forever; "
                            "check that every parent is -1 or an earlier index before walking")
                fail(f"{call} did not finish within the time limit; expected ValueError ({wrong})", case)


def integer_edges():
    """Calls whose positions reach and pass the top of int8, int16 and int32 (P + depth, P + T;
    the inputs' dtype holds the inputs, not the positions made from them), for the general
    integer-type check."""
    chain, tree = [-1, 0, 1, 2, 3, 4, 5], [-1, -1, 0, 1, 1, 3, 2]
    return ([(name, (parents, P), {}) for P in (124, 32764) for parents in (chain, tree)
             for name in ("tree_positions", "tree_attention_mask")]
            + [("tree_positions", (chain, 2**31 - 7), {})])
