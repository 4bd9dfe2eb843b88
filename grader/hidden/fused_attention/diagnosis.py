"""Known-wrong kernels, as the outputs they would give, and the sentence that names a match.

Each variant recomputes the oracle with one classic mistake built in. A submission whose
(o, lse) equals a variant's on the same input, while the right answer differs, shows that
mistake.
"""
import numpy as np

from grader.checking import Explanation, Variant, explain

from . import oracle


def same(got, want, tol) -> bool:
    """Equal within the absolute ``tol`` (section 1's rule), with -inf (and NaN) in the same places."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False
    finite = np.isfinite(want)
    if not np.array_equal(finite, np.isfinite(got)) or not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    if not np.array_equal(got[np.isinf(got)], want[np.isinf(want)]):
        return False
    return bool(np.all(np.abs(got[finite] - want[finite]) <= tol))


def _moved_slots(case):
    """Filled slots holding another position than their index. Only these tell slot indices from positions:
    where the filled slots all hold their own index (a ring not yet full), the variant differs from the
    right answer only on empty slots, and an answer that merely lets empty slots through fits it too."""
    return np.flatnonzero((case.k_pos >= 0) & (case.k_pos != np.arange(case.S)))


def _slot_indices(case):
    if not _moved_slots(case).size:
        return None
    return oracle.attention(case.q, case.k, case.v, case.q_pos, np.arange(case.S), case.window)


def _slot_sentence(case):
    slot = int(_moved_slots(case)[0])
    return (f"the mask compares slot indices with query positions instead of the positions stored in "
            f"kv.positions: slot {slot} holds position {int(case.k_pos[slot]):,}, not {slot:,}, "
            f"in this ring buffer of {case.S} slots")


def _top_left(case):
    if np.array_equal(case.q_pos, np.arange(case.T)):
        return None
    return oracle.attention(case.q, case.k, case.v, np.arange(case.T), case.k_pos, case.window)


def _top_left_sentence(case):
    return (f"query row i is treated as position i, not q_positions[i]: with T = {case.T} over "
            f"S = {case.S:,} keys, row 0 sees as if it stood at position 0 instead of "
            f"{int(case.q_pos[0]):,}")


def _window(delta):
    def variant(case):
        if case.window is None or case.window + delta < 1:
            return None
        return oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, case.window + delta)
    return variant


def _window_sentence(case):
    return (f"the window admits one key too many or too few: window = {case.window} must let each "
            f"query see exactly {case.window} positions, itself included (k > p - W, k <= p)")


def _no_window(case):
    if case.window is None:
        return None
    return oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, None)


def _lse_unscaled_max(case):
    """o right; lse = m + log(l) with m the max of the UNSCALED scores and l the scaled sum."""
    o, lse = oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, case.window)
    top = np.zeros(case.T)
    for i in range(case.T):
        seen = oracle.visible_keys(int(case.q_pos[i]), case.k_pos, case.window)
        if seen.any():
            top[i] = (case.k[seen].astype(np.float64) @ case.q[i]).max() / np.sqrt(case.D)
    return o, lse + (np.sqrt(case.D) - 1) * top


VARIANTS = [  # a case is a checks.Case; a variant's output (o, lse), None when it cannot differ
    Variant("slot_index_positions", _slot_indices, _slot_sentence),
    Variant("top_left_alignment", _top_left, _top_left_sentence),
    Variant("window_off_by_one", _window(+1), _window_sentence),
    Variant("window_off_by_one", _window(-1), _window_sentence),
    Variant("window_ignored", _no_window,
            lambda case: f"the window is not applied: with window = {case.window}, each query still sees "
                         "every earlier key"),
    Variant("lse_unscaled", _lse_unscaled_max,
            lambda case: f"o is right but lse adds the running max of the unscaled scores q . k to the log of "
                         f"the scaled sum; both must use q . k / sqrt(D), here D = {case.D}"),
]


def right(case):
    return oracle.attention(case.q, case.k, case.v, case.q_pos, case.k_pos, case.window)


def _same_outputs(got, wrong, case) -> bool:
    return same(got[0], wrong[0], case.tol) and same(got[1], wrong[1], case.lse_tol)


def nan_sentence(case, o, want_lse) -> str:
    nan_rows = np.isnan(o).any(axis=1)
    blind = int((nan_rows & np.isneginf(want_lse)).sum())
    return (f"{int(nan_rows.sum())} of {case.T} rows come back as NaN ({blind} of them see no key at all): "
            "a row whose running max is still -inf, because a tile or the whole cache hides every key "
            "from it, computes exp(-inf - (-inf)); such a tile must leave the row's state as it was, "
            "and a row that never sees a key ends at o = 0, lse = -inf")


def explain_outputs(failures) -> Explanation:
    """Which known mistakes explain every failing (case, (o, lse))."""
    return explain(VARIANTS, failures, right=right, same=_same_outputs)
