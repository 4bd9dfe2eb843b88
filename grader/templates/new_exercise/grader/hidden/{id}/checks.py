"""Hidden checks for {id}. Each ``check_*`` is one stable check id (without the prefix); its
docstring's first line says what it tries, in words safe to show a candidate."""
import numpy as np

from grader.checking import expect_array, expect_rejected, fail, odd_size

from . import oracle


def check_random_sizes(ex):
    """Random T and S, T < S included, sizes that are not powers of two."""
    for _ in range(20):
        S = odd_size(ex.rng, 2, 500)
        T = int(ex.rng.integers(1, S + 1))
        got = expect_array(ex.candidate.new_positions(T, S), call=f"new_positions({T}, {S})", shape=(T,), kind="i")
        want = oracle.new_positions(T, S)
        if not np.array_equal(got, want):
            if np.array_equal(got, np.arange(T)):
                ex.diagnose("positions_from_zero", f"with {S - T} tokens cached, the new ones were numbered from 0")
            fail(f"new_positions({T}, {S}) returned {got[:5].tolist()}..., expected {want[:5].tolist()}...",
                 case={"T": T, "S": S})


def check_rejects_invalid_sizes(ex):
    """T = 0 and T > S raise ValueError."""
    for T, S in ((0, 3), (4, 3)):
        expect_rejected(ex, ex.candidate.new_positions, T, S, call=f"new_positions({T}, {S})",
                        diagnosis="accepts_invalid_sizes")
