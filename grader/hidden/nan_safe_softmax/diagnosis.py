"""Known-wrong variants of masked softmax and online-softmax attention, and their sentences.

Each variant computes what a classic mistake returns on the same input; a check names the
mistake only when the candidate's answer agrees with the variant (same values within the
tolerance, or the same rows broken in the same way), never from a guess.
"""
import math

import numpy as np

from . import oracle


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1])


def broken_rows(got: np.ndarray, want: np.ndarray, atol: float) -> np.ndarray:
    """Indices of rows (last axis) of ``got`` holding a non-finite value or off by more than atol."""
    got, want = _rows(np.asarray(got, dtype=np.float64)), _rows(np.asarray(want, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(got) | ~(np.abs(got - want) <= atol)
    return np.flatnonzero(bad.any(axis=1))


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
    return bool(np.all(np.abs(got[finite] - variant[finite]) <= atol))


def breaks_like(got, variant, want, atol: float) -> bool:
    """``got`` and ``variant`` go wrong on exactly the same (non-empty) set of rows, and in the
    same way there: non-finite in the same entries (an answer off a little everywhere is not
    one that overflows)."""
    bad = broken_rows(got, want, atol)
    if bad.size == 0 or not np.array_equal(bad, broken_rows(variant, want, atol)):
        return False
    got_rows, variant_rows = (_rows(np.asarray(x, dtype=np.float64))[bad] for x in (got, variant))
    return bool(np.array_equal(np.isfinite(got_rows), np.isfinite(variant_rows)))


# ---- masked_softmax -------------------------------------------------------------------------

def empty_rows(mask: np.ndarray) -> np.ndarray:
    """Flat indices of the rows (last axis) with nothing allowed."""
    return np.flatnonzero(~_rows(mask).any(axis=1))


def softmax_nan_rows(scores, mask):
    """No guard: the max of a fully masked row is -inf and -inf - (-inf) is NaN everywhere."""
    out = _rows(oracle.masked_softmax(scores, mask)).copy()
    out[empty_rows(mask)] = np.nan
    return out.reshape(scores.shape)


def softmax_uniform_rows(scores, mask):
    """A finite fill such as -1e30: a fully masked row is all equal, so every entry gets 1/S."""
    out = _rows(oracle.masked_softmax(scores, mask)).copy()
    out[empty_rows(mask)] = 1.0 / scores.shape[-1]
    return out.reshape(scores.shape)


def softmax_without_max(scores, mask):
    """exp of the raw scores in the input dtype: overflows to inf (inf / inf = NaN), underflows to 0."""
    with np.errstate(all="ignore"):
        e = np.where(mask, np.exp(scores), np.zeros_like(scores))
        total = e.sum(axis=-1, keepdims=True)
        return e / np.where(total > 0, total, np.ones_like(total))


def softmax_additive_bias(scores, mask):
    """scores + where(mask, 0, -inf): a NaN or +inf held at a masked entry turns its row into NaN."""
    out = _rows(oracle.masked_softmax(scores, mask)).copy()
    held = _rows(scores)
    poisoned = ((np.isnan(held) | (held == np.inf)) & ~_rows(mask)).any(axis=1)
    out[poisoned] = np.nan
    return out.reshape(scores.shape)


def _row_label(shape, flat_row: int) -> str:
    index = np.unravel_index(flat_row, shape[:-1]) if len(shape) > 1 else ()
    return "row " + (", ".join(str(int(i)) for i in index) if index else "0")


def diagnose_softmax(got, scores, mask, atol):
    """(diagnosis id, sentence) for the known mistake ``got`` equals on this input, or None."""
    want = oracle.masked_softmax(scores, mask)
    S, shape = scores.shape[-1], scores.shape
    empty = empty_rows(mask)
    if empty.size and same_answer(got, softmax_nan_rows(scores, mask), atol):
        return ("nan_on_fully_masked_row",
                f"{_row_label(shape, empty[0])} of scores {shape} has no allowed entry and came back as NaN: "
                "its max is -inf and exp(s - max) evaluates -inf - (-inf); a row with nothing allowed must be zeros")
    if empty.size and same_answer(got, softmax_uniform_rows(scores, mask), atol):
        return ("finite_mask_sentinel",
                f"{_row_label(shape, empty[0])} of scores {shape} has no allowed entry and came back as 1/{S} "
                f"= {1 / S:.4g} in every entry: a finite fill such as -1e30 makes a fully masked row a uniform "
                "average over masked entries instead of zeros")
    if breaks_like(got, softmax_without_max(scores, mask), want, atol):
        row = broken_rows(got, want, atol)[0]
        allowed = _rows(scores)[row][_rows(mask)[row]].tolist() or [math.nan]
        return ("overflow_without_max",
                f"{_row_label(shape, row)} of scores {shape} ({scores.dtype}, allowed scores from {min(allowed):.3g} "
                f"to {max(allowed):.3g}) is broken exactly as exp of the raw scores breaks it: without "
                "subtracting the row max, exp overflows to inf (inf / inf = NaN) or underflows to 0")
    if breaks_like(got, softmax_additive_bias(scores, mask), want, atol):
        row = broken_rows(got, want, atol)[0]
        held = _rows(scores)[row][~_rows(mask)[row]]
        odd = held[np.isnan(held) | (held == np.inf)][0]
        return ("additive_mask_bias",
                f"{_row_label(shape, row)} of scores {shape} holds {odd} at a masked entry and came back NaN: "
                "adding a -inf bias still reads masked entries (NaN + -inf = NaN, inf + -inf = NaN); "
                "select with np.where instead")
    return None


# ---- attention states -----------------------------------------------------------------------

def attention_nan_rows(q, k, v, mask):
    out, _ = oracle.attention(q, k, v, mask)
    out[~mask.any(axis=1)] = np.nan
    return out


def attention_uniform_rows(q, k, v, mask):
    """A finite fill: a row with nothing allowed averages every value with equal weight."""
    out, _ = oracle.attention(q, k, v, mask)
    if k.shape[0]:
        out[~mask.any(axis=1)] = v.astype(np.float64).mean(axis=0)
    return out


def attention_without_scale(q, k, v, mask):
    D = q.shape[1]
    out, _ = oracle.attention(q.astype(np.float64) * math.sqrt(D), k, v, mask)
    return out


def attention_without_max(q, k, v, mask):
    """One chunk in the input dtype with exp of the raw scaled scores, guarded against 0 / 0."""
    with np.errstate(all="ignore"):
        s = (q @ k.T) * (1.0 / math.sqrt(q.shape[1]))
        e = np.where(mask, np.exp(s), np.zeros_like(s))
        total = e.sum(axis=-1)[:, None]
        return (e @ v) / np.where(total > 0, total, np.ones_like(total))


def merged_without_rescale(q, k, v, mask, cuts):
    """Chunks [cuts[i], cuts[i+1]) each relative to their own max, summed without rescaling."""
    s, v64 = oracle.scaled_scores(q, k), v.astype(np.float64)
    l, o = np.zeros(q.shape[0]), np.zeros((q.shape[0], v.shape[1]))
    for a, b in zip(cuts, cuts[1:]):
        for i in range(q.shape[0]):
            seen = a + np.flatnonzero(mask[i, a:b])
            if seen.size:
                w = np.exp(s[i, seen] - s[i, seen].max())
                l[i] += w.sum()
                o[i] += w @ v64[seen]
    return o / np.where(l > 0, l, 1.0)[:, None]


def diagnose_attention(got, q, k, v, mask, atol, cuts=None):
    """(diagnosis id, sentence) for the known mistake ``got`` (finalized output) equals, or None.

    ``cuts`` are the chunk boundaries when the output was merged from several chunks."""
    T, D, n = q.shape[0], q.shape[1], k.shape[0]
    want, _ = oracle.attention(q, k, v, mask)
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size and same_answer(got, attention_nan_rows(q, k, v, mask), atol):
        return ("nan_on_fully_masked_row",
                f"query row {empty[0]} of {T} may see none of the {n} keys and its output came back NaN: the "
                "running max stays -inf and the rescale exp(s - m) evaluates -inf - (-inf); it must be zeros")
    if empty.size and n and same_answer(got, attention_uniform_rows(q, k, v, mask), atol):
        return ("finite_mask_sentinel",
                f"query row {empty[0]} of {T} may see none of the {n} keys and its output is the plain average "
                "of all values: a finite fill such as -1e30 gives every masked key the same weight when "
                "nothing is allowed (a real inference engine shipped this); it must be zeros")
    if cuts is None and same_answer(got, attention_without_scale(q, k, v, mask), atol):
        return ("missing_scale",
                f"with D = {D}, your output equals attention on q k^T without the 1/sqrt(D) = "
                f"{1 / math.sqrt(D):.4g} scale")
    if cuts is not None and len(cuts) > 2 and same_answer(got, merged_without_rescale(q, k, v, mask, cuts), atol):
        return ("no_rescale_on_merge",
                f"after merging {len(cuts) - 1} chunks of {n} keys, your output equals the chunks' l and o "
                "added as they are: each chunk is relative to its own max, so merging must first multiply "
                "each side by exp(m_side - max(m_a, m_b))")
    if cuts is None and breaks_like(got, attention_without_max(q, k, v, mask), want, atol):
        row = broken_rows(got, want, atol)[0]
        scores = oracle.scaled_scores(q[row:row + 1], k)[0][mask[row]].tolist() or [math.nan]
        return ("overflow_without_max",
                f"query row {row} (scaled scores from {min(scores):.3g} to {max(scores):.3g}, {q.dtype}) is "
                "broken exactly as exp of the raw scores breaks it: without subtracting the running max, "
                "exp overflows to inf (inf / inf = NaN) or underflows to 0")
    return None
