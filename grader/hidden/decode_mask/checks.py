"""Hidden checks for decode_mask. Each ``check_*`` is one stable check id (without the prefix)."""
import numpy as np

from grader import own_tests
from grader.checking import (SHOWN, error_of, expect_array, expect_rejected, fail, grid_picture, name_mistakes,
                             odd_size, other_argument_types, slips_of)

from . import diagnosis, oracle


def _mask(ex, T, S):
    call = f"decode_causal_mask({T!r}, {S!r})"
    return expect_array(ex.candidate.decode_causal_mask(T, S), call=call, shape=(int(T), int(S)), kind="b",
                        case={"T": int(T), "S": int(S)})


def _keys(n: int) -> str:
    return f"{n:,} key" if n == 1 else f"{n:,} keys"


def _fail_masks(ex, failures, context="", tried=1):
    """Fail with the smallest of ``failures`` [((T, S), submitted mask)], which draws best; a
    mistake is named only when it explains every one of them."""
    failures = sorted(failures, key=lambda f: f[0][0] * f[0][1])  # the one shown first: a diagnosis speaks of it
    (T, S), got = failures[0]
    want = oracle.causal_mask(T, S)
    row, col = (int(x) for x in np.argwhere(want != got)[0])
    message = (f"decode_causal_mask({T}, {S}){context} differs from the expected mask in "
               f"{int((want != got).sum()):,} of {T * S:,} cells (first at row {row}, key {col}: expected "
               f"{bool(want[row, col])}); row {row} sees {_keys(int(got[row].sum()))}, expected {row + S - T + 1:,}"
               + (f" ({len(failures)} of {tried} shapes wrong)" if tried > 1 else ""))
    message += name_mistakes(ex, diagnosis.explain_masks(failures))
    fail(message, case={"T": T, "S": S, "seed": ex.seed},
         picture=grid_picture(want, got, f"decode_causal_mask({T}, {S}): rows are queries, columns keys",
                              keep_corner=True))


def _expect_cases(ex, shapes, context=""):
    """Check every (T, S) (a list, or a generator that may look at the answers so far); name a mistake
    only when it explains every failing shape."""
    failures, tried = [], 0
    for T, S in shapes:
        tried += 1
        got = _mask(ex, T, S)
        if not np.array_equal(got, oracle.causal_mask(int(T), int(S))):
            failures.append(((int(T), int(S)), got))
    if failures:
        _fail_masks(ex, failures, context, tried=tried)


def random_shapes(rng, count, max_s=300):
    shapes = []
    for _ in range(count):
        S = odd_size(rng, 3, max_s)
        shapes.append((odd_size(rng, 2, S + 1), S))
    return shapes


def check_dtype_and_shape(ex):
    """Returns a numpy bool array of shape [T, S]."""
    for T, S in [(1, 1), (3, 7), (6, 6), (2, 97)]:
        _mask(ex, T, S)


# First among the mask checks: its figures make the clearest diagnosis sentence.
def check_speculative_verify(ex):
    """Speculative verification: T = 4 new queries over S = 4,096 keys."""
    # the oracle's 6 masked entries are pinned in tests/test_decode_mask_oracle.py
    _expect_cases(ex, [(4, 4096)], context=" (speculative verification)")


def check_plain_decode(ex):
    """T = 1: the single new query sees every cached key, itself included."""
    _expect_cases(ex, [(1, 1), (1, 2), (1, 37), (1, 4099)])


def check_prefill(ex):
    """T = S: prefill from an empty cache is the lower triangle (S = 1 included)."""
    _expect_cases(ex, [(1, 1), (5, 5), (31, 31)])


def check_random_shapes(ex):
    """Random T > 1 over S keys, sizes not powers of two, match the rule on absolute positions."""
    _expect_cases(ex, random_shapes(ex.rng, 40))


def check_chunked_prefill(ex):
    """A chunk in the middle of a ~10K-token prompt: T = chunk, S = cached + chunk."""
    prompt = 10_007
    cached = int(ex.rng.integers(3_000, prompt - 600))
    chunk = 509
    _expect_cases(ex, [(chunk, cached + chunk)], context=f" (a {chunk}-token chunk after {cached:,} cached)")


def check_long_context(ex):
    """Positions past 2^15 and 2^16 (S up to ~100K keys): decode, a draft and a chunk; and a short draft
    just past 2^24 keys, where float32 no longer holds every integer position."""
    rng = ex.rng
    past_15, past_16 = odd_size(rng, 2**15 + 1, 2**16), odd_size(rng, 70_000, 100_000)
    # S - 3 a multiple of 4 past 2^24: float32 rounds key S - 2 down to query S - 3's position (ties go to
    # even), so a float32 mask shows that query one future key; T = 3 keeps a whole-row mistake (which
    # differs in 3 cells) from fitting that one cell. A 3 x S bool answer: 50 MB.
    past_24 = 2**24 + 3 + 4 * int(rng.integers(0, 2))

    def shapes():
        yield from [(1, past_15), (5, past_16), (1, past_16), (odd_size(rng, 100, 300), past_16)]
        if not slips_of(ex):  # asked only of a bool answer: an int64 one (a slip, hire) is 400 MB, over the wire's cap
            yield 3, past_24
    _expect_cases(ex, shapes(), context=" (long context)")


def check_every_argument_counts(ex):
    """Calls that differ in one argument only, interleaved and repeated, each get their own answer."""
    T = odd_size(ex.rng, 3, 20)
    S = T + odd_size(ex.rng, 3, 60)
    shapes = [(T, S), (T + 1, S + 1), (T, S + 1), (T + 1, S), (1, S - T + 1), (T, S)]  # equal offsets too
    _expect_cases(ex, shapes, context=" (after calls that differ in one argument)")


def check_numpy_integer_sizes(ex):
    """T and S given as numpy integers of any signed type work like Python ints."""
    wide = [(np.int64(3), np.int64(11)), (np.int64(1), 40)]
    narrow = [(np.int32(1), np.int32(40)), (np.int16(5), 9), (np.int8(7), np.int8(100))]
    _expect_cases(ex, [(int(T), int(S)) for T, S in wide + narrow])  # a wrong answer is blamed as such, not on the type
    with other_argument_types("decode_causal_mask rejected numpy integer sizes"):
        _expect_cases(ex, wide, context=" (numpy integer sizes)")
    _expect_cases(ex, narrow, context=" (numpy integer sizes of narrow dtypes, where np.int64 works)")


def check_incremental_attention(ex):
    """Attention of the T new queries with your mask equals full-sequence causal attention."""
    rng = ex.rng
    for T, S in [(5, 37)] + random_shapes(rng, 6, max_s=120):
        D = int(rng.integers(3, 40))
        q, k, v = (rng.standard_normal((S, D)) for _ in range(3))
        full = oracle.full_sequence_attention(q, k, v)[-T:]
        mask = _mask(ex, T, S)
        step = oracle.attention(q[-T:], k, v, mask)
        error = float(error_of(step, full))
        if not error <= 1e-9:  # BLAS may sum in another order: equal up to rounding
            empty = not np.isfinite(step).all()
            fail(f"with your mask, attention of the last {T} of {S} tokens (D = {D}) differs from "
                 f"full-sequence causal attention by up to {error:.3g}"
                 + ("; a row that sees no key gives NaN" if empty else "")
                 + name_mistakes(ex, diagnosis.explain_masks([((T, S), mask)])),
                 case={"T": T, "S": S, "D": D, "seed": ex.seed}, kind="nan" if empty else "wrong")


def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    expect_rejected(ex, ex.candidate.decode_causal_mask, 4, 3, call="decode_causal_mask(4, 3)",
                    diagnosis="accepts_invalid_sizes", why=SHOWN)


def check_rejects_invalid_sizes(ex):
    """T < 1, S < 1, T > S or a size that is not an int (an integral float, a string or None too) raise
    ValueError, with a message."""
    for T, S in [(0, 5), (6, 5), (-2, 4), (1, 0), (0, 0), (2.5, 5), (2, 4.5), (3.0, 8), (2, np.float64(6.0)),
                 ("2", 4), (None, 3), (2, "5")]:
        expect_rejected(ex, ex.candidate.decode_causal_mask, T, S, call=f"decode_causal_mask({T!r}, {S!r})",
                        diagnosis="accepts_invalid_sizes", why="sizes outside 1 <= T <= S give a silent answer",
                        case={"T": T, "S": S})


# The shared own-tests checks come last: they wait for the runs started as grading began.
check_own_tests_pass_on_reference = own_tests.check_own_tests_pass_on_reference


def check_own_tests_catch_top_left(ex):
    """Your test_decode_mask.py fails on the classic wrong mask, one the public tests cannot tell from the right one."""
    own_tests.expect_classic_caught(ex, diagnosis=(
        "t1_only_tests",
        "your tests pass on a mask that sees every key for one query and is top-left, np.tril(np.ones((T, S))), "
        "for a chunk: they only try shapes where it agrees with the right one (T = 1, T = S, or a single key); "
        "add a case with 1 < T < S"))


check_own_tests_mutation_score = own_tests.check_own_tests_mutation_score


def integer_edges():
    """Calls whose sizes reach the top of int8 and int16, for the general integer-type check."""
    return [("decode_causal_mask", (T, S), {}) for T, S in [(3, 127), (2, 32767)]]
