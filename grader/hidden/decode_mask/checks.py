"""Hidden checks for decode_mask. Each ``check_*`` is one stable check id (without the prefix)."""
import numpy as np

from grader import own_tests
from grader.checking import expect_array, expect_raises, fail, grid_picture

from . import diagnosis, oracle


def _mask(ex, T, S):
    call = f"decode_causal_mask({T}, {S})"
    return expect_array(ex.candidate.decode_causal_mask(T, S), call=call, shape=(T, S), kind="b",
                        case={"T": T, "S": S})


def _mismatch(ex, T, S):
    """None when the candidate's mask is right for (T, S); else (expected, submitted)."""
    got, want = _mask(ex, T, S), oracle.causal_mask(T, S)
    return None if np.array_equal(got, want) else (want, got)


def _fail_mask(ex, T, S, want, got, context=""):
    wrong = int((want != got).sum())
    row, col = (int(x) for x in np.argwhere(want != got)[0])
    message = (f"decode_causal_mask({T}, {S}){context} differs from the expected mask in {wrong:,} of "
               f"{T * S:,} cells (first at row {row}, key {col}: expected {bool(want[row, col])})")
    found = diagnosis.diagnose(got, T, S)
    if found:
        ex.diagnose(*found)
        message += f"; it looks {found[1]}" if found[0] == "top_left_alignment" else f"; {found[1]}"
    fail(message, case={"T": T, "S": S, "seed": ex.seed},
         picture=grid_picture(want, got, f"decode_causal_mask({T}, {S}): rows are queries, columns keys"))


def _expect_cases(ex, shapes, context=""):
    """Check every (T, S); report the smallest failing one, which draws best."""
    failures = [(T * S, T, S, bad) for T, S in shapes if (bad := _mismatch(ex, T, S))]
    if failures:
        _, T, S, (want, got) = min(failures, key=lambda f: f[0])
        _fail_mask(ex, T, S, want, got, context)


def _not_power_of_two(n):
    return n & (n - 1) != 0


def random_shapes(rng, count, max_s=300):
    shapes = []
    while len(shapes) < count:
        S = int(rng.integers(3, max_s))
        T = int(rng.integers(2, S + 1))
        if _not_power_of_two(S) and _not_power_of_two(T):
            shapes.append((T, S))
    return shapes


def check_dtype_and_shape(ex):
    """Returns a numpy bool array of shape [T, S]."""
    for T, S in [(1, 1), (3, 7), (6, 6), (2, 97)]:
        _mask(ex, T, S)


# First among the mask checks: its figures make the clearest diagnosis sentence.
def check_speculative_verify(ex):
    """Speculative verification, T = 4 over S = 4,096: exactly 6 of 16,384 entries masked."""
    T, S = 4, 4096  # the oracle's 6 masked entries are pinned in tests/test_decode_mask_oracle.py
    if bad := _mismatch(ex, T, S):
        _fail_mask(ex, T, S, *bad, context=" (speculative verification)")


def check_plain_decode(ex):
    """T = 1: the single new query sees every cached key, itself included."""
    _expect_cases(ex, [(1, 1), (1, 2), (1, 37), (1, 4099)])


def check_prefill(ex):
    """T = S: prefill from an empty cache is the lower triangle."""
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


def check_incremental_attention(ex):
    """Attention of the T new queries with your mask equals full-sequence causal attention."""
    rng = ex.rng
    shapes = [(5, 37)] + random_shapes(rng, 6, max_s=120)
    for T, S in shapes:
        D = int(rng.integers(3, 40))
        q, k, v = (rng.standard_normal((S, D)) for _ in range(3))
        full = oracle.full_sequence_attention(q, k, v)[-T:]
        mask = _mask(ex, T, S)
        step = oracle.attention(q[-T:], k, v, mask)
        error = float(np.nan_to_num(np.abs(step - full), nan=np.inf).max())
        if not error <= 1e-9:  # BLAS may sum in another order: equal up to rounding
            found = diagnosis.diagnose(mask, T, S)
            if found:
                ex.diagnose(*found)
            fail(f"with your mask, attention of the last {T} of {S} tokens (D = {D}) differs from "
                 f"full-sequence causal attention by up to {error:.3g}"
                 + ("; a row that sees no key gives NaN" if not np.isfinite(step).all() else ""),
                 case={"T": T, "S": S, "D": D, "seed": ex.seed})


def check_rejects_invalid_sizes(ex):
    """T < 1, S < 1 or T > S raise ValueError."""
    for T, S in [(0, 5), (6, 5), (-2, 4), (1, 0), (0, 0)]:
        call = f"decode_causal_mask({T}, {S})"
        try:
            expect_raises(ex.candidate.decode_causal_mask, T, S, call=call, case={"T": T, "S": S})
        except AssertionError:
            ex.diagnose("accepts_invalid_sizes",
                        f"{call} did not raise ValueError: sizes outside 1 <= T <= S give a silent answer")
            raise


# The shared own-tests checks come last: they wait for the runs started as grading began.
check_own_tests_pass_on_reference = own_tests.check_own_tests_pass_on_reference


def check_own_tests_catch_top_left(ex):
    """Your test_decode_mask.py fails on a top-left aligned mask."""
    own_tests.expect_classic_caught(ex, diagnosis=(
        "t1_only_tests",
        "your tests pass on a top-left mask, np.tril(np.ones((T, S))): they only try shapes where it "
        "agrees with the right one (T = S, or a single key); add a case with 1 < T < S"))


check_own_tests_mutation_score = own_tests.check_own_tests_mutation_score
