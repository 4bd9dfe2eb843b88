"""Known-wrong versions of masked softmax and online-softmax attention, one ``Variant`` each.

A case is what a check tried (:class:`SoftmaxCase`, :class:`AttentionCase`); an answer is what
came back (the softmax array; an :class:`AttentionAnswer`: finalize's output and the state's
m + log(l)). A variant's ``build(case)`` gives a test of an answer: does it look like that
mistake's answer on this case? Exact within the tolerance where the mistake fixes every value;
"broken in the same rows, the same way" where it only fixes which rows overflow. ``explain``
names a mistake only when it fits every failing case of a check (or it and one other do); a
mistake of the whole computation is also ruled out by a passing case it would have broken.
"""
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from grader.checking import Explanation, Variant, explain, tolerance

from . import oracle

def _magnitudes(scores, allowed) -> np.ndarray:
    """m of section 1's rule, per row (last axis): the largest allowed score's magnitude in that row,
    the only scores its values involve. (One m for a whole case would let a row near 1e300 set the
    tolerance of a row near 1.) Beyond section 1's 1e4 (the prompt's "far beyond") the rule is the
    same: one rounding of a score 7e15 is 1, so an exact answer cannot be asked of a log-domain
    state there, only a finite one."""
    seen = np.abs(np.asarray(scores, dtype=np.float64))
    seen = np.where(np.asarray(allowed, bool) & np.isfinite(seen), seen, 0.0)
    return np.max(seen, axis=-1, initial=0.0)


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1])


def row_is_off(got: np.ndarray, want: np.ndarray, atol) -> np.ndarray:
    """Per row (last axis): some entry is non-finite where ``want`` is finite, or off by more than
    atol (a float, or one per entry)."""
    atol = _rows(np.broadcast_to(atol, np.shape(want)))
    got, want = _rows(np.asarray(got, dtype=np.float64)), _rows(np.asarray(want, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got - want) <= atol) & ~(got == want)
    return bad.any(axis=1)


def broken_rows(got: np.ndarray, want: np.ndarray, atol: float) -> np.ndarray:
    """Indices of the rows (last axis) of ``got`` that are off."""
    return np.flatnonzero(row_is_off(got, want, atol))


def same_answer(got: np.ndarray, variant: np.ndarray, atol: float) -> bool:
    """Equal within atol where finite, with NaN and infinities in the same places."""
    got, variant = np.asarray(got, dtype=np.float64), np.asarray(variant, dtype=np.float64)
    if got.shape != variant.shape:
        return False
    finite = np.isfinite(variant)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(np.isnan(got), np.isnan(variant)):
        return False
    if not np.array_equal(got[~finite & ~np.isnan(got)], variant[~finite & ~np.isnan(variant)]):
        return False
    return bool(np.all(np.abs(got[finite] - variant[finite]) <= np.broadcast_to(atol, got.shape)[finite]))


def breaks_like(got, variant, want, atol: float) -> bool:
    """``got`` and ``variant`` go wrong on exactly the same set of rows (none, where the variant is
    right), and in the same way there: non-finite in the same entries (an answer off a little
    everywhere is not one that overflows)."""
    bad = broken_rows(got, want, atol)
    if not np.array_equal(bad, broken_rows(variant, want, atol)):
        return False
    got_rows, variant_rows = (_rows(np.asarray(x, dtype=np.float64))[bad] for x in (got, variant))
    return bool(np.array_equal(np.isfinite(got_rows), np.isfinite(variant_rows)))


def _row_label(shape, flat_row: int) -> str:
    index = np.unravel_index(flat_row, shape[:-1]) if len(shape) > 1 else ()
    return "row " + (", ".join(str(int(i)) for i in index) if index else "0")


# ---- masked_softmax -------------------------------------------------------------------------

@dataclass
class SoftmaxCase:
    """One call of masked_softmax: its inputs, the call's text and the case details to report."""
    scores: np.ndarray
    mask: np.ndarray
    call: str
    details: dict

    @cached_property
    def atol(self) -> np.ndarray:
        """Section 1's rule per entry: probabilities (at most 1) from the scores of their row."""
        return tolerance((self.scores,), _magnitudes(self.scores, self.mask))[..., None]

    @property
    def size(self) -> int:
        return int(self.scores.size)

    @cached_property
    def want(self) -> np.ndarray:
        return oracle.masked_softmax(self.scores, self.mask)

    def is_off(self, got) -> bool:
        return bool(row_is_off(got, self.want, self.atol).any())

    def has_nan(self, got) -> bool:
        """NaN where a number was due."""
        return bool((np.isnan(np.asarray(got, dtype=np.float64)) & ~np.isnan(self.want)).any())

    @cached_property
    def empty(self) -> np.ndarray:
        """Flat indices of the rows (last axis) with nothing allowed."""
        return np.flatnonzero(~_rows(self.mask).any(axis=1))


def softmax_nan_rows(case: SoftmaxCase):
    """No guard: the max of a fully masked row is -inf and -inf - (-inf) is NaN everywhere."""
    out = _rows(case.want).copy()
    out[case.empty] = np.nan
    return out.reshape(case.scores.shape)


def softmax_uniform_rows(case: SoftmaxCase):
    """A finite fill such as -1e30: a fully masked row is all equal, so every entry gets 1/S."""
    out = _rows(case.want).copy()
    out[case.empty] = 1.0 / case.scores.shape[-1]
    return out.reshape(case.scores.shape)


def softmax_without_max(case: SoftmaxCase):
    """exp of the raw scores in the input dtype: overflows to inf (inf / inf = NaN), underflows to 0."""
    scores, mask = case.scores, case.mask
    with np.errstate(all="ignore"):
        e = np.where(mask, np.exp(scores), np.zeros_like(scores))
        total = e.sum(axis=-1, keepdims=True)
        return e / np.where(total > 0, total, np.ones_like(total))


def softmax_additive_bias(case: SoftmaxCase):
    """scores + where(mask, 0, -inf): a NaN or +inf held at a masked entry turns its row into NaN."""
    out = _rows(case.want).copy()
    held = _rows(case.scores)
    poisoned = ((np.isnan(held) | (held == np.inf)) & ~_rows(case.mask)).any(axis=1)
    out[poisoned] = np.nan
    return out.reshape(case.scores.shape)


def _equal_to(make, applies=lambda case: True):
    """The mistake fixes every value: an answer fits when it equals ``make(case)`` within the tolerance."""
    def build(case):
        if not applies(case):
            return None
        wrong = make(case)
        return lambda got: same_answer(got, wrong, case.atol)
    return build


def _broken_like(make):
    """The mistake fixes which rows break and how: an answer fits when it breaks the same way."""
    def build(case):
        wrong = make(case)
        return lambda got: breaks_like(got, wrong, case.want, case.atol)
    return build


def _has_empty_row(case) -> bool:
    return case.empty.size > 0


def _softmax_nan_sentence(case):
    return (f"{_row_label(case.scores.shape, case.empty[0])} of scores {case.scores.shape} has no allowed entry "
            "and came back as NaN: its max is -inf and exp(s - max) evaluates -inf - (-inf); a row with nothing "
            "allowed must be zeros")


def _softmax_sentinel_sentence(case):
    S = case.scores.shape[-1]
    return (f"{_row_label(case.scores.shape, case.empty[0])} of scores {case.scores.shape} has no allowed entry "
            f"and came back as 1/{S} = {1 / S:.4g} in every entry: a finite fill such as -1e30 makes a fully "
            "masked row a uniform average over masked entries instead of zeros")


def _softmax_overflow_sentence(case):
    row = broken_rows(softmax_without_max(case), case.want, case.atol)[0]
    allowed = _rows(case.scores)[row][_rows(case.mask)[row]].tolist() or [math.nan]
    return (f"{_row_label(case.scores.shape, row)} of scores {case.scores.shape} ({case.scores.dtype}, allowed "
            f"scores from {min(allowed):.3g} to {max(allowed):.3g}) is broken exactly as exp of the raw scores "
            "breaks it: without subtracting the row max, exp overflows to inf (inf / inf = NaN) or underflows to 0")


def _softmax_additive_sentence(case):
    row = broken_rows(softmax_additive_bias(case), case.want, case.atol)[0]
    held = _rows(case.scores)[row][~_rows(case.mask)[row]]
    odd = held[np.isnan(held) | (held == np.inf)][0]
    return (f"{_row_label(case.scores.shape, row)} of scores {case.scores.shape} holds {odd} at a masked entry "
            "and came back NaN: adding a -inf bias still reads masked entries (NaN + -inf = NaN, "
            "inf + -inf = NaN); select with np.where instead")


SOFTMAX_VARIANTS = [
    Variant("nan_on_fully_masked_row", _equal_to(softmax_nan_rows, _has_empty_row), _softmax_nan_sentence),
    Variant("finite_mask_sentinel", _equal_to(softmax_uniform_rows, _has_empty_row), _softmax_sentinel_sentence),
    Variant("overflow_without_max", _broken_like(softmax_without_max), _softmax_overflow_sentence),
    Variant("additive_mask_bias", _broken_like(softmax_additive_bias), _softmax_additive_sentence),
]


def _fits(got, test, case) -> bool:
    return test(got)


# Mistakes that fix every value computed (not only some rows): a case the submission got right
# where such a mistake gives a wrong answer is evidence against it, as much as a failing case it
# does not fit. A missing guard (NaN rows, a finite fill, an additive mask) may be local.
WHOLE_COMPUTATION = frozenset({"overflow_without_max", "missing_scale", "no_rescale_on_merge"})


def _not_contradicted(variants, others) -> list:
    """The variants that no (case, answer) of ``others`` rules out: the check's passing cases, and every
    case earlier checks judged, passing or not (a mistake of the whole computation shows in each)."""
    def contradicted(variant):
        tests = ((variant.build(case), answer) for case, answer in others)
        return variant.id in WHOLE_COMPUTATION and any(test is not None and not test(answer) for test, answer in tests)
    return [v for v in variants if not contradicted(v)]


def explain_softmax(failures, passes=()) -> Explanation:
    """Which known mistakes explain every failing (SoftmaxCase, submitted probabilities), and are
    not ruled out by ``passes``: passing cases, and the cases earlier checks judged (:func:`_not_contradicted`)."""
    return explain(_not_contradicted(SOFTMAX_VARIANTS, passes), failures, right=lambda case: case.want, same=_fits)


# ---- attention states -----------------------------------------------------------------------

@dataclass
class AttentionCase:
    """A state of q over (k, v, mask), judged through finalize and m + log(l). ``cuts`` are the
    chunk boundaries when the state was merged from chunk states that were each right."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: np.ndarray
    what: str
    details: dict
    cuts: list | None = None

    @cached_property
    def magnitude(self) -> np.ndarray:
        """m per query row: its visible scaled scores."""
        return _magnitudes(oracle.scaled_scores(self.q, self.k), self.mask)

    @cached_property
    def atol(self) -> np.ndarray:
        """Section 1's rule per output row [T, 1], whose size is the values'."""
        size = np.max(np.where(np.isfinite(self.want), np.abs(self.want), 0.0), axis=-1, initial=1.0)
        return tolerance((self.q, self.k, self.v), self.magnitude, size)[:, None]

    @cached_property
    def lse_tol(self) -> np.ndarray:
        """Section 1's rule for m + log(l) per row, itself of the scores' size."""
        return tolerance((self.q, self.k, self.v), self.magnitude)

    @property
    def size(self) -> int:
        return int(self.q.shape[0] * max(self.k.shape[0], 1) * self.q.shape[1])

    @property
    def merged(self) -> bool:
        return self.cuts is not None and len(self.cuts) > 2

    @cached_property
    def right(self) -> "AttentionAnswer":
        out, lse = oracle.attention(self.q, self.k, self.v, self.mask)
        return AttentionAnswer(out, lse, lse, np.where(np.isinf(lse), 0.0, 1.0))

    @property
    def want(self) -> np.ndarray:
        return self.right.out

    def is_off(self, got: "AttentionAnswer") -> bool:
        return bool(row_is_off(got.out, self.want, self.atol).any() or lse_is_off(got.lse, self.right.lse, self).any())

    def has_nan(self, got: "AttentionAnswer") -> bool:
        """NaN where a number was due (the oracle never gives one)."""
        return bool(np.isnan(np.asarray(got.out, dtype=np.float64)).any() or np.isnan(got.lse).any())

    @cached_property
    def empty(self) -> np.ndarray:
        """The query rows that may see no key."""
        return np.flatnonzero(~self.mask.any(axis=1))


@dataclass
class AttentionAnswer:
    """What the submission's state means: finalize's output [T, D] and m + log(l) [T] (with m, l to quote)."""
    out: np.ndarray
    lse: np.ndarray
    m: np.ndarray = field(repr=False)
    l: np.ndarray = field(repr=False)


def lse_is_off(got, want, case) -> np.ndarray:
    """Per row: m + log(l) differs from the log-sum-exp of the row's scaled scores (a row that saw
    nothing must be -inf exactly: a relative tolerance of -inf would let any value pass)."""
    with np.errstate(invalid="ignore"):
        close = np.isfinite(want) & (np.abs(got - want) <= case.lse_tol)
    return ~((got == want) | close)


def attention_nan_rows(case: AttentionCase):
    out = case.want.copy()
    out[case.empty] = np.nan
    return out


def attention_uniform_rows(case: AttentionCase):
    """A finite fill: a row with nothing allowed averages every value with equal weight."""
    out = case.want.copy()
    out[case.empty] = case.v.astype(np.float64).mean(axis=0)
    return out


def attention_without_scale(case: AttentionCase):
    """(output, lse) of attention on q k^T without the 1/sqrt(D) scale."""
    D = case.q.shape[1]
    return oracle.attention(case.q.astype(np.float64) * math.sqrt(D), case.k, case.v, case.mask)


def _unscaled(case):
    """The output and m + log(l) both come from unscaled scores (a one-key row shows it only in the lse)."""
    out, lse = attention_without_scale(case)
    return lambda got: same_answer(got.out, out, case.atol) and not lse_is_off(got.lse, lse, case).any()


def attention_without_max(case: AttentionCase):
    """One chunk in the input dtype with exp of the raw scaled scores, guarded against 0 / 0."""
    q, k, v, mask = case.q, case.k, case.v, case.mask
    with np.errstate(all="ignore"):
        s = (q @ k.T) * (1.0 / math.sqrt(q.shape[1]))
        e = np.where(mask, np.exp(s), np.zeros_like(s))
        total = e.sum(axis=-1)[:, None]
        return (e @ v) / np.where(total > 0, total, np.ones_like(total))


def merged_without_rescale(case: AttentionCase):
    """Chunks [cuts[i], cuts[i+1]) each relative to their own max, summed without rescaling."""
    q, v64, mask = case.q, case.v.astype(np.float64), case.mask
    s = oracle.scaled_scores(q, case.k)
    l, o = np.zeros(q.shape[0]), np.zeros((q.shape[0], v64.shape[1]))
    for a, b in zip(case.cuts, case.cuts[1:]):
        for i in range(q.shape[0]):
            seen = a + np.flatnonzero(mask[i, a:b])
            if seen.size:
                w = np.exp(s[i, seen] - s[i, seen].max())
                l[i] += w.sum()
                o[i] += w @ v64[seen]
    return o / np.where(l > 0, l, 1.0)[:, None]


def _only_in_rows(case, may, row_fits):
    """A test of answers wrong in at least one row, only in rows ``may``, and in each such row as
    ``row_fits(out_row, lse, out_right, lse_right)`` says."""
    def fits(got: AttentionAnswer) -> bool:
        out_off = row_is_off(got.out, case.want, case.atol)
        lse_off = lse_is_off(got.lse, case.right.lse, case)
        off = out_off | lse_off
        if not off.any() or (off & ~may).any():
            return False
        return all(row_fits(got.out[i], got.lse[i], not out_off[i], not lse_off[i]) for i in np.flatnonzero(off))
    return fits


def _nan_rows(case):
    """Rows come back NaN: the output row, or m + log(l) with an output row that is right or zero
    (a finalize that divides only where l > 0 hides a NaN l). Without merging only rows that saw
    nothing may; after merging chunk states that were each right, any row may: the tree decides
    which empty sides meet."""
    may = np.ones(case.q.shape[0], bool) if case.merged else ~case.mask.any(axis=1)
    if not may.any():
        return None

    def row_fits(out, lse, out_right, lse_right):
        out_nan, lse_nan = bool(np.isnan(out).all()), bool(np.isnan(lse))
        return (out_nan or (lse_nan and (out_right or not out.any()))) and (lse_nan or lse_right)
    return _only_in_rows(case, may, row_fits)


def _uniform_rows(case):
    """Rows that saw nothing average every value (output), or claim keys were seen (a finite m + log(l))."""
    if not case.empty.size or not case.k.shape[0]:
        return None
    mean = case.v.astype(np.float64).mean(axis=0)

    def row_fits(out, lse, out_right, lse_right):
        near = bool(np.all(np.abs(out - mean) <= case.atol.min()))  # an empty row's is the smallest (m = 0)
        return (out_right or near) and (lse_right or bool(np.isfinite(lse)))
    return _only_in_rows(case, ~case.mask.any(axis=1), row_fits)


def _output_equal_to(make, applies):
    def build(case):
        if not applies(case):
            return None
        wrong = make(case)
        return lambda got: same_answer(got.out, wrong, case.atol)
    return build


def _output_broken_like(make, applies):
    def build(case):
        if not applies(case):
            return None
        wrong = make(case)
        return lambda got: breaks_like(got.out, wrong, case.want, case.atol)
    return build


def _nan_sentence(case):
    T, n = case.q.shape[0], case.k.shape[0]
    if case.merged:
        return (f"each of the {len(case.cuts) - 1} chunk states was right, but after merging, rows came back NaN: "
                "merging two states that both saw nothing for a row rescales by exp(-inf - (-inf)); a side "
                "with m = -inf must contribute nothing")
    return (f"query row {case.empty[0]} of {T} may see none of the {n} keys and came back NaN (its output or "
            "m + log(l)): the running max stays -inf and the rescale exp(s - m) evaluates -inf - (-inf); the "
            "output must be zeros and m + log(l) = -inf")


def _sentinel_sentence(case):
    T, n = case.q.shape[0], case.k.shape[0]
    return (f"query row {case.empty[0]} of {T} may see none of the {n} keys, yet its output is the plain average "
            "of all values or its state claims keys were seen (a finite m + log(l)): a finite fill such as -1e30 "
            "gives every masked key the same weight when nothing is allowed (a real inference engine shipped "
            "this); the output must be zeros and m + log(l) = -inf")


def _scale_sentence(case):
    D = case.q.shape[1]
    return (f"with D = {D}, your output and m + log(l) equal attention on q k^T without the 1/sqrt(D) = "
            f"{1 / math.sqrt(D):.4g} scale")


def _rescale_sentence(case):
    return (f"after merging {len(case.cuts) - 1} chunks of {case.k.shape[0]} keys, your output equals the chunks' "
            "l and o added as they are: each chunk is relative to its own max, so merging must first multiply "
            "each side by exp(m_side - max(m_a, m_b))")


def _overflow_sentence(case):
    row = broken_rows(attention_without_max(case), case.want, case.atol)[0]
    scores = oracle.scaled_scores(case.q[row:row + 1], case.k)[0][case.mask[row]].tolist() or [math.nan]
    return (f"query row {row} (scaled scores from {min(scores):.3g} to {max(scores):.3g}, {case.q.dtype}) is "
            "broken exactly as exp of the raw scores breaks it: without subtracting the running max, "
            "exp overflows to inf (inf / inf = NaN) or underflows to 0")


ATTENTION_VARIANTS = [
    Variant("nan_on_fully_masked_row", _nan_rows, _nan_sentence),
    Variant("finite_mask_sentinel", _uniform_rows, _sentinel_sentence),
    Variant("missing_scale", _unscaled, _scale_sentence),
    Variant("no_rescale_on_merge", _output_equal_to(merged_without_rescale, lambda case: case.merged),
            _rescale_sentence),
    Variant("overflow_without_max", _output_broken_like(attention_without_max, lambda case: not case.merged),
            _overflow_sentence),
]


def explain_attention(failures, passes=()) -> Explanation:
    """Which known mistakes explain every failing (AttentionCase, AttentionAnswer), and are not
    ruled out by ``passes``: passing cases, and the cases earlier checks judged (:func:`_not_contradicted`)."""
    return explain(_not_contradicted(ATTENTION_VARIANTS, passes), failures, right=lambda case: case.right,
                   same=_fits)
