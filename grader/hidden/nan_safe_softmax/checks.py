"""Hidden checks for nan_safe_softmax. Each ``check_*`` is one stable check id (without the prefix).

Value checks judge values only; the two ``quiet_*`` checks judge the numpy warnings raised
during the same kinds of calls (the contract promises none), so a submission whose values are
right but that computes NaN and patches it afterwards is told apart from one that returns NaN.
States are judged by what they mean: ``finalize``'s output and the log-sum-exp m + log(l).
Every check tries all its cases and reports the smallest failing one; a mistake is named only
when it explains every failing case (or it and one other do) and no passing case rules it out
(``diagnosis.explain_*``, or ``settle`` for dtypes and warnings).

Sentence (CONTRACT section 1, the exercise's section, the prompt) -> the checks that hold it:

| sentence | checks |
|---|---|
| scaled scores anywhere in [-1e4, 1e4]; a row all below -745 has one | far_scores_attention, large_logits_attention |
| slots never attended hold any finite value, 1e30 included | far_scores_attention, softmax_masked_entries_ignored |
| (beside float32 q: float64 values float32 cannot hold) | far_scores_attention |
| float inputs float32 or float64 | every value check draws both |
| precision follows the inputs | every value check (``diagnosis``: ``checking.tolerance``) |
| right values in another container or dtype: hire | every check (the plugin fails a check with slips as hygiene), |
| | the two dtype checks |
| a row with no allowed entry gives zeros, never NaN (S = 0 too) | softmax_fully_masked_rows, |
| | fully_masked_rows_attention |
| no numpy warning | quiet_on_empty_rows, quiet_on_large_logits |
| scale 1/sqrt(D); m + log(l) is the log-sum-exp | one_chunk_attention |
| n may be 0 | empty_chunk |
| merging associative and commutative | chunks_merged_in_any_order |
| the empty state is the identity | empty_state_is_identity, empty_chunk |
| masked entries count for nothing, whatever they hold | softmax_masked_entries_ignored |
| float32 in, float32 out | softmax_dtype_and_shape, state_dtype_and_shape |
| bad shapes raise ValueError (v [n, D]: as wide as q) | rejects_bad_shapes |
| (public tests) the invalid call they show raises ValueError, in a live grading too | rejects_the_invalid_case_shown |

Held elsewhere: ownership, calls in any order, integer dtypes and "invalid arguments change
nothing" (the general checks every exercise gets). Held by no check as such: the state's bits
(m as the running max): states are judged by what they mean, as the contract says.
"""
from dataclasses import dataclass
from functools import partial

import numpy as np

from grader.checking import (SHOWN, Miss, allowing_empty, describe, expect_rejected, fail, garbage, measure,
                             misfit_calls, name_mistakes, odd_size, offset_scores, received, settle, slips_of)
from grader.sandbox import CandidateRaised

from . import diagnosis, oracle

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
MEASURES_MEMORY = False  # measure() takes the warnings only: no kit-only floor child, no collection between checks


def _text(x) -> str:
    return f"{x.dtype} {list(x.shape)}"


def _call(ex, name, *args):
    """(value, warnings) of one call; the sandbox keeps numpy's default of ignoring underflow:
    exp of a very negative score is 0 by design in any softmax."""
    value, _, warnings = measure(ex, ex.candidate, name, *args, memory=False)
    return value, warnings


@dataclass
class Reply:
    value: object
    call: str
    warnings: list


# ---- calls, each validated for type and shape --------------------------------------------

# Every returned array keeps the dtype of the float inputs (the prompt: float32 in, float32 out);
# another dtype is a slip, judged on its values. The dtype checks pass ``as_given`` to see the
# dtype itself and name the mistake behind it (upcasts_float32).

def _kept(as_given, *inputs):
    return None if as_given else np.result_type(*(np.asarray(a).dtype for a in inputs))


def _softmax(ex, scores, mask, case, as_given=False) -> Reply:
    call = f"masked_softmax(scores {_text(scores)}, mask {_text(mask)})"
    value, warnings = _call(ex, "masked_softmax", scores, mask)
    return Reply(received(value, call=call, shape=scores.shape, kind="f", dtype=_kept(as_given, scores),
                          slips=slips_of(ex), case=case), call, warnings)


def _expect_state(value, call, T, D, case, slips, dtype):
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        fail(f"{call} returned {describe(value)}; expected a tuple (m [T], l [T], o [T, D]) with T = {T}, D = {D}",
             case)
    return tuple(received(part, call=f"{call} -> {name}", shape=shape, kind="f", dtype=dtype, slips=slips, case=case)
                 for part, name, shape in zip(value, "mlo", [(T,), (T,), (T, D)]))


def _partial(ex, q, k, v, mask, case, as_given=False) -> Reply:
    call = f"partial_attention(q {_text(q)}, k {_text(k)}, v {_text(v)}, mask {_text(mask)})"
    value, warnings = _call(ex, "partial_attention", q, k, v, mask)
    return Reply(_expect_state(value, call, q.shape[0], v.shape[1], case, slips_of(ex), _kept(as_given, q, k, v)),
                 call, warnings)


def _merge(ex, a, b, case, call="merge_partials(a, b)", as_given=False) -> Reply:
    value, warnings = _call(ex, "merge_partials", tuple(a), tuple(b))
    return Reply(_expect_state(value, call, a[0].shape[0], a[2].shape[1], case, slips_of(ex),
                               _kept(as_given, *a, *b)), call, warnings)


def _finalize(ex, state, case, call="finalize(state)", as_given=False) -> Reply:
    T, D = state[2].shape
    value, warnings = _call(ex, "finalize", tuple(state))
    return Reply(received(value, call=call, shape=(T, D), kind="f", dtype=_kept(as_given, *state),
                          slips=slips_of(ex), case=case), call, warnings)


# ---- comparisons --------------------------------------------------------------------------

def _first_off(got, want, atol):
    """(index, got, want) of the first entry that is non-finite where want is finite or off by more than atol."""
    got64 = np.asarray(got, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(got64 - want) <= atol) & ~(got64 == want)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return index, float(got64[index]), float(want[index])


def _g(x: float) -> str:
    return f"{x:.6g}"


def _versus(got: float, expected: float) -> str:
    """'<got>, expected <expected>' with enough digits to show that they differ."""
    digits = next((d for d in (6, 9, 12, 17) if f"{got:.{d}g}" != f"{expected:.{d}g}"), 17)
    return f"{got:.{digits}g}, expected {expected:.{digits}g}"


def _mask(rng, T, n, share=0.5, empty=()):
    """Random mask [T, n]: every row allows at least one key, except the rows in ``empty``."""
    mask = rng.random((T, n)) < share
    if n:
        mask[np.arange(T), rng.integers(0, n, T)] = True
    mask[list(empty)] = False
    return mask


def _qkv(rng, T, n, D, dtype, scale=1.0):
    return tuple((rng.standard_normal(shape) * scale).astype(dtype) for shape in ((T, D), (n, D), (n, D)))


def _attention_case(ex, dtype, T=(5, 40), n=(3, 90), D=(3, 40), empty=0.0, share=0.5):
    """Random q, k, v and mask [T, n] with sizes from the ranges (not powers of two), where a
    share ``empty`` of the query rows (at least one, if any) sees no key; and the case dict."""
    rng = ex.rng
    T, n, D = odd_size(rng, *T), odd_size(rng, *n), odd_size(rng, *D)
    q, k, v = _qkv(rng, T, n, D, dtype)
    rows = rng.choice(T, size=max(1, int(T * empty)), replace=False) if empty else ()
    mask = _mask(rng, T, n, share=share, empty=rows)
    return q, k, v, mask, {"T": T, "n": n, "D": D, "dtype": str(dtype), "seed": ex.seed}


# ---- masked_softmax -----------------------------------------------------------------------

def _softmax_judged(ex, scores, mask, details, label=""):
    """(case, answer) of masked_softmax on this input, right or wrong: both are evidence."""
    reply = _softmax(ex, scores, mask, details)
    return diagnosis.SoftmaxCase(scores, mask, reply.call + label, details), reply.value


def _softmax_message(case, got) -> str:
    index, value, expected = _first_off(got, case.want, case.atol)
    return (f"{case.call}: entry {list(index)} is {_versus(value, expected)} "
            f"(that row allows {int(case.mask[index[:-1]].sum())} of {case.scores.shape[-1]} entries)")


def _settle(ex, judged, explain, message):
    """Fail on the smallest failing (case, answer) of ``judged``, told by ``message``; name a mistake
    only when it explains every failing case and no passing case rules it out, nor (for a mistake of
    the whole computation) any case an earlier check judged. NaN where a number was due, in any
    failing case, is its own kind."""
    kept = ex.evidence.setdefault(explain, [])
    earlier = len(kept)
    kept.extend(judged)
    failures = sorted(((c, a) for c, a in judged if c.is_off(a)), key=lambda f: f[0].size)
    if not failures:
        return
    passes = [(c, a) for c, a in judged if not c.is_off(a)]
    case, got = failures[0]
    explanation = explain(failures, passes + kept[:earlier])
    text = message(case, got) + _also(failures) + name_mistakes(ex, explanation)
    fail(text, case=case.details, kind="nan" if any(c.has_nan(a) for c, a in failures) else "wrong")


def _also(failures) -> str:
    return f" ({len(failures) - 1} more failing case{'s' if len(failures) > 2 else ''})" if len(failures) > 1 else ""


def _dtype_miss(reply, want, case, size):
    """A Miss when ``reply`` holds an array whose dtype is not ``want`` (None otherwise); float32
    promoted to float64 fits upcasts_float32."""
    arrays = reply.value if isinstance(reply.value, (tuple, list)) else [reply.value]
    got = [a.dtype for a in arrays]
    if all(d == want for d in got):
        return None
    found = []
    if want == F32 and F64 in got:
        found = [("upcasts_float32", f"{reply.call} returned float64 for float32 inputs: a float64 scratch array or "
                                     "scalar (such as np.sqrt(D)) promotes the result")]
    return Miss(size, f"{reply.call} returned {', '.join(map(str, got))}; expected {want} throughout, the dtype of "
                      "its inputs", case, kind="hygiene", found=found)


def check_softmax_dtype_and_shape(ex):
    """masked_softmax returns the shape and the floating dtype of scores (float32 stays float32)."""
    misses = []
    for shape in [(7,), (5, 13), (3, 4, 9)]:
        for dtype in (F32, F64):
            scores = ex.rng.standard_normal(shape).astype(dtype)
            mask = ex.rng.random(shape) < 0.6
            case = {"shape": list(shape), "dtype": str(dtype), "seed": ex.seed}
            misses.append(_dtype_miss(_softmax(ex, scores, mask, case, as_given=True), dtype, case, scores.size))
    settle(ex, misses)


def check_softmax_random_rows(ex):
    """Random scores and masks (every row allows something), shapes not powers of two, match softmax."""
    rng = ex.rng
    shapes = [(1, 1), (3, 1)] + [(odd_size(rng, 2, 60), odd_size(rng, 3, 140)) for _ in range(4)]
    shapes += [(odd_size(rng, 2, 6), odd_size(rng, 2, 12), odd_size(rng, 3, 50)) for _ in range(2)]
    judged = []
    for shape in shapes:
        for dtype in (F32, F64):
            scores = (rng.standard_normal(shape) * rng.choice([0.1, 1.0, 8.0])).astype(dtype)
            rows = int(np.prod(shape[:-1]))
            mask = _mask(rng, rows, shape[-1], share=rng.uniform(0.1, 0.9)).reshape(shape)
            judged.append(_softmax_judged(ex, scores, mask, {"shape": list(shape), "dtype": str(dtype),
                                                             "seed": ex.seed}))
    _settle(ex, judged, diagnosis.explain_softmax, _softmax_message)


def _softmax_with_empty_rows(rng, dtype):
    T, S = odd_size(rng, 5, 40), odd_size(rng, 3, 97)
    empty = rng.choice(T, size=max(1, T // 3), replace=False)
    scores = rng.standard_normal((T, S)).astype(dtype)
    return scores, _mask(rng, T, S, empty=empty)


def check_softmax_fully_masked_rows(ex):
    """Rows with nothing allowed give zeros (never NaN); the other rows are unaffected; rows of no entries at all
    (S = 0, a valid size) give an empty result of the same shape."""
    rng, judged = ex.rng, []
    for shape in [(0,), (odd_size(rng, 2, 9), 0), (2, odd_size(rng, 2, 5), 0), (0, odd_size(rng, 3, 9))]:
        dtype = rng.choice([F32, F64])
        scores, mask = np.zeros(shape, dtype), np.zeros(shape, bool)
        call = f"masked_softmax(scores {_text(scores)}, mask {_text(mask)})"
        value = allowing_empty(ex, partial(_call, ex, "masked_softmax", scores, mask), empty=True, what=call,
                               stand_in=lambda: (np.zeros(shape, dtype), []))[0]
        received(value, call=call, shape=shape, kind="f", slips=slips_of(ex),
                 case={"shape": list(shape), "dtype": str(np.dtype(dtype)), "seed": ex.seed})
    for dtype in (F32, F64):
        scores, mask = _softmax_with_empty_rows(rng, dtype)
        judged.append(_softmax_judged(ex, scores, mask, {"shape": list(scores.shape), "dtype": str(dtype),
                                                         "seed": ex.seed}))
    scores = rng.standard_normal((2, 3, 11)).astype(F32)
    mask = rng.random((2, 3, 11)) < 0.5
    mask[1] = False  # a whole batch entry masked: padding
    judged.append(_softmax_judged(ex, scores, mask, {"shape": [2, 3, 11], "dtype": "float32", "seed": ex.seed},
                                  label=" (batch 1 fully masked)"))
    _settle(ex, judged, diagnosis.explain_softmax, _softmax_message)


def _large_logit_scores(rng, dtype):
    """Rows of huge scores: mixed signs, all huge and equal, all hugely negative, all hugely positive;
    every row masks something. float64 also asks rows between 2e9 and 1e11, where its tolerance still
    judges a probability (float32's does not past ~1e4): a finite fill for the masked entries (such as
    -1e9) above every allowed score of a row takes its max and leaves it all zeros."""
    sizes = [1e4, 3e4, 1e5, 1e10, 1e20] if dtype == F32 else [1e4, 1e5, rng.uniform(2e9, 1e11), 1e30, 1e100, 1e300]
    S = odd_size(rng, 5, 45)
    rows = []
    for big in sizes:
        rows.append(rng.choice([-big, big], S) * rng.uniform(0.5, 1.0, S))  # mixed signs
        rows.append(np.full(S, big))  # all equal: uniform over the allowed ones
        rows.append(-big + rng.uniform(0, 3, S))  # every allowed score far below 0
        rows.append(big - rng.uniform(0, 3, S))  # every allowed score far above 0
    scores = np.array(rows).astype(dtype)
    mask = _mask(rng, len(rows), S, share=0.7)
    mask[mask.all(axis=1), 0] = False  # a masked entry in every row: what a fill value stands in for
    return scores, mask


def check_softmax_large_logits(ex):
    """Scores of +-1e4 and far beyond (float64 rows from 2e9 to 1e11 among them), in float32 and float64, beside
    masked entries, give the right probabilities."""
    judged = []
    for dtype in (F32, F64):
        scores, mask = _large_logit_scores(ex.rng, dtype)
        judged.append(_softmax_judged(ex, scores, mask, {"shape": list(scores.shape), "dtype": str(dtype),
                                                         "seed": ex.seed}))
    _settle(ex, judged, diagnosis.explain_softmax, _softmax_message)


def check_softmax_masked_entries_ignored(ex):
    """Whatever a masked entry holds (NaN, +inf, -inf, huge) has no effect on the result."""
    rng, judged = ex.rng, []
    for dtype in (F32, F64):
        T, S = odd_size(rng, 5, 30), odd_size(rng, 5, 60)
        scores = rng.standard_normal((T, S)).astype(dtype)
        mask = _mask(rng, T, S, share=0.6, empty=[T - 1])
        held = np.array([np.nan, np.inf, -np.inf, 1e30, np.finfo(dtype).max / 4, -np.finfo(dtype).max / 4], dtype)
        scores[~mask] = rng.choice(held, int((~mask).sum()))
        for row, value in zip(rng.permutation(T), held):  # one kind alone per row too: a NaN beside
            scores[row, ~mask[row]] = value  # a huge value can hide what the huge value alone does
        judged.append(_softmax_judged(ex, scores, mask, {"shape": [T, S], "dtype": str(dtype), "seed": ex.seed},
                                      label=" (masked entries hold NaN, inf and huge values)"))
    _settle(ex, judged, diagnosis.explain_softmax, _softmax_message)


# ---- partial_attention / merge_partials / finalize --------------------------------------

def _judged_states(ex, state, q, k, v, mask, details, what, cuts=None, states=None) -> list:
    """[(case, answer)]: what the state means (finalize's output and m + log(l)) against attention
    of q over (k, v, mask), right or wrong: both are evidence.

    For a wrong state merged from chunks (``cuts``, their ``states`` in key order), the chunk
    states are judged instead when one of them is wrong, so that the merge is blamed only when
    each chunk is right."""
    case = diagnosis.AttentionCase(q, k, v, mask, what, details)
    out = _finalize(ex, state, details, call=f"finalize({what})")
    answer = diagnosis.AttentionAnswer(out.value, oracle.state_lse(state[0], state[1]), state[0], state[1])
    if states is not None and case.is_off(answer):
        chunks = [judged for (a, b), chunk in zip(zip(cuts, cuts[1:]), states)
                  for judged in _judged_states(ex, chunk, q, k[a:b], v[a:b], mask[:, a:b],
                                               details | {"chunk": [a, b]}, f"the state of chunk [{a}, {b})")]
        if any(c.is_off(a) for c, a in chunks):
            return chunks
        case.cuts = cuts
    return [(case, answer)]


def _attention_message(case, got) -> str:
    """The first wrong entry of finalize's output, else the first wrong m + log(l)."""
    off = _first_off(got.out, case.want, case.atol)
    if off is not None:
        (row, col), value, expected = off
        return (f"finalize({case.what}): row {row}, column {col} is {_versus(value, expected)} (row {row} may see "
                f"{int(case.mask[row].sum())} of {case.k.shape[0]} keys; T = {case.q.shape[0]}, D = {case.q.shape[1]})")
    row = int(np.flatnonzero(diagnosis.lse_is_off(got.lse, case.right.lse, case))[0])
    return (f"{case.what}: m + log(l) of row {row} is {_g(float(got.lse[row]))}, expected the log-sum-exp of its "
            f"scaled scores {_g(float(case.right.lse[row]))} (m = {_g(float(got.m[row]))}, "
            f"l = {_g(float(got.l[row]))})")


def check_state_dtype_and_shape(ex):
    """partial_attention returns (m [T], l [T], o [T, D]); merge and finalize keep the input dtype."""
    misses = []
    for dtype in (F32, F64):
        T, n, D = 5, 7, 3
        q, k, v = _qkv(ex.rng, T, n, D, dtype)
        mask = _mask(ex.rng, T, n)
        case = {"T": T, "n": n, "D": D, "dtype": str(dtype), "seed": ex.seed}
        first = _partial(ex, q, k, v, mask, case, as_given=True)
        both = _merge(ex, first.value, first.value, case, call="merge_partials(state, state)", as_given=True)
        out = _finalize(ex, both.value, case, as_given=True)
        misses += [_dtype_miss(reply, dtype, case, T * n * D) for reply in (first, both, out)]
    settle(ex, misses)


def check_one_chunk_attention(ex):
    """One chunk: finalize(partial_attention(...)) is masked attention with scale 1/sqrt(D), m + log(l) its LSE."""
    judged = []
    for _ in range(4):
        for dtype in (F32, F64):
            q, k, v, mask, case = _attention_case(ex, dtype, T=(2, 50), n=(3, 130), D=(3, 70),
                                                  share=ex.rng.uniform(0.2, 1.0))
            state = _partial(ex, q, k, v, mask, case)
            judged += _judged_states(ex, state.value, q, k, v, mask, case, state.call)
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


def check_fully_masked_rows_attention(ex):
    """Query rows that may see no key of the chunk: output zeros, m + log(l) = -inf, no NaN."""
    judged = []
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, empty=1 / 3)
        state = _partial(ex, q, k, v, mask, case)
        judged += _judged_states(ex, state.value, q, k, v, mask, case, state.call)
    q, k, v = _qkv(ex.rng, 6, 45, 9, F32)
    mask = np.zeros((6, 45), bool)  # a tile that no query may see
    case = {"T": 6, "n": 45, "D": 9, "dtype": "float32", "seed": ex.seed}
    state = _partial(ex, q, k, v, mask, case)
    judged += _judged_states(ex, state.value, q, k, v, mask, case, state.call + " with mask all False")
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


def check_empty_chunk(ex):
    """A chunk of n = 0 keys is a state that saw nothing, and merging it changes nothing."""
    judged = []
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, T=(3, 30), n=(3, 60), D=(3, 30))
        n, case = k.shape[0], case | {"n": 0}
        try:
            empty = _partial(ex, q, k[:0], v[:0], mask[:, :0], case)
        except CandidateRaised as exc:
            # n = 0 is the case itself: the exception names the mistake on its own
            ex.diagnose("crashes_on_empty_chunk",
                        f"partial_attention with n = 0 keys raised {exc.type_name} ({exc.message}): "
                        "the max over no keys needs an initial value of -inf (np.max(..., initial=-np.inf))")
            fail(f"partial_attention(q {_text(q)}, k {_text(k[:0])}, v {_text(v[:0])}, mask {_text(mask[:, :0])}) "
                 f"raised {exc.type_name}: {exc.message}; an empty chunk must give the empty state", case,
                 kind="crash")
        judged += _judged_states(ex, empty.value, q, k[:0], v[:0], mask[:, :0], case, empty.call)
        full = _partial(ex, q, k, v, mask, case | {"n": n})
        for a, b in [(empty.value, full.value), (full.value, empty.value)]:
            merged = _merge(ex, a, b, case | {"n": n})
            judged += _judged_states(ex, merged.value, q, k, v, mask, case | {"n": n},
                                        "merge_partials of an empty chunk's state and a chunk's state")
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


def check_empty_state_is_identity(ex):
    """Merging with the empty state (m = -inf, l = 0, o = 0), on either side, changes nothing."""
    judged = []
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, empty=1 / 4)
        (T, D), n = q.shape, k.shape[0]
        nothing = oracle.empty_state(T, D, dtype)
        state = _partial(ex, q, k, v, mask, case).value
        for a, b, what in [(nothing, state, "merge_partials(empty, state)"),
                           (state, nothing, "merge_partials(state, empty)")]:
            merged = _merge(ex, a, b, case, call=what)
            judged += _judged_states(ex, merged.value, q, k, v, mask, case, what)
        both = _merge(ex, nothing, nothing, case, call="merge_partials(empty, empty)")
        none = np.zeros((T, n), bool)
        judged += _judged_states(ex, both.value, q, k, v, none, case, both.call)
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


def _split(rng, n, pieces, gaps=True):
    """Sorted cut points 0 = c0 <= ... <= cp = n; with ``gaps``, at least one chunk is empty."""
    if not gaps:
        return [0, *np.sort(rng.choice(np.arange(1, n), pieces - 1, replace=False)).tolist(), n]
    inner = np.sort(rng.integers(0, n + 1, pieces - 1))
    cuts = [0, *inner.tolist(), n]
    at = int(rng.integers(0, len(cuts)))
    return sorted(cuts + [cuts[at]])


def _chunk_states(ex, q, k, v, mask, cuts, case):
    return [_partial(ex, q, k[a:b], v[a:b], mask[:, a:b], case).value for a, b in zip(cuts, cuts[1:])]


def _merge_tree(ex, states, rng, case, shape):
    """Merge every state into one: a kernel's left fold, its mirror, or a random tree with random sides."""
    pool = list(states)
    if shape == "left":
        acc = pool[0]
        for s in pool[1:]:
            acc = _merge(ex, acc, s, case).value
        return acc
    if shape == "right":
        acc = pool[-1]
        for s in reversed(pool[:-1]):
            acc = _merge(ex, s, acc, case).value
        return acc
    while len(pool) > 1:
        i, j = (int(x) for x in rng.choice(len(pool), 2, replace=False))
        merged = _merge(ex, pool[i], pool[j], case).value
        pool = [p for t, p in enumerate(pool) if t not in (i, j)]
        pool.insert(int(rng.integers(0, len(pool) + 1)), merged)
    return pool[0]


def _chunked_case(ex, rng, dtype, scale=1.0, qkv=None, gaps=True):
    """q, k, v, mask and chunk cuts; with ``gaps`` a query row sees nothing, a chunk is empty and
    another one is masked for every query."""
    T, n, D = odd_size(rng, 3, 40), odd_size(rng, 20, 160), odd_size(rng, 3, 50)
    q, k, v = qkv(rng, T, n) if qkv else _qkv(rng, T, n, D, dtype, scale)
    mask = _mask(rng, T, n, share=rng.uniform(0.2, 0.8), empty=[int(rng.integers(0, T))] if gaps else ())
    cuts = _split(rng, n, int(rng.integers(3, 7)), gaps)
    if gaps:
        spans = [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
        a, b = spans[int(rng.integers(0, len(spans)))]
        mask[:, a:b] = False  # a whole chunk no query may see
    return q, k, v, mask, cuts


def check_chunks_merged_in_any_order(ex):
    """Keys in random chunks (some empty, some fully masked) merged in any order and tree shape equal one pass;
    chunks whose scores sit 0 to 40 apart too (every chunk counts, however far below the best)."""
    rng, judged = ex.rng, []
    for trial, shape in enumerate(["left", "right", "random", "random", "random"]):
        dtype = F64 if trial == 4 else (F32, F64)[trial % 2]  # float64: a far chunk's weight is above its eps
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, scale=float(rng.choice([1.0, 3.0])))
        case = {"T": q.shape[0], "n": k.shape[0], "D": q.shape[1], "dtype": str(dtype), "cuts": cuts,
                "tree": shape, "seed": ex.seed}
        if trial == 4:  # chunks whose scores sit 24 apart (exp(-24) = 4e-11, far above float64's eps), all seen:
            q[:, 1:] *= 0.05  # the scores of a chunk close to its offset, q[:, 0] k[:, 0] / sqrt(D)
            q[:, 0] = np.sqrt(q.shape[1])
            offsets = rng.permutation([24.0 * (i % 2) for i in range(len(cuts) - 1)])
            for (a, b), offset in zip(zip(cuts, cuts[1:]), offsets):
                k[a:b, 0] = offset
            mask[:] = True
            case["chunk_offsets"] = "0 and 24, every key seen"
        chunks = _chunk_states(ex, q, k, v, mask, cuts, case)
        states = list(chunks)
        if shape == "random":
            rng.shuffle(states)
        merged = _merge_tree(ex, states, rng, case, shape)
        judged += _judged_states(ex, merged, q, k, v, mask, case,
                                    f"the {len(cuts) - 1} chunk states merged ({shape} tree)", cuts=cuts, states=chunks)
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


def _exact_large_qkv(dtype, c):
    """q, k with small-integer entries times c, D = 16: every scaled score is exact in dtype."""
    def make(rng, T, n):
        D = 16
        q = (rng.integers(-40, 41, (T, D)) * c).astype(dtype)
        k = rng.integers(-40, 41, (n, D)).astype(dtype)
        return q, k, rng.standard_normal((n, D)).astype(dtype)
    return make


def _equal_huge_scores(q, k, mask) -> int:
    """Make the keys one row may see a single key, far above 0 for that row (products of small
    integers, still exact): on equal huge scores only subtracting the max keeps exp finite, so
    that row tells the max apart from a mean or any other shift. Returns the row."""
    row = int(np.flatnonzero(mask.any(axis=1))[0])
    k[mask[row]] = np.where(q[row] >= 0, 40, -40).astype(k.dtype)
    return row


def check_large_logits_attention(ex):
    """Scaled scores around +-1e4 and far beyond, float32 and float64, in one chunk and merged."""
    rng, judged = ex.rng, []
    for dtype, c in [(F32, 8.0), (F32, 2.0 ** 20), (F64, 2.0 ** 40)]:
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, qkv=_exact_large_qkv(dtype, c))
        row = _equal_huge_scores(q, k, mask)
        case = {"T": q.shape[0], "n": k.shape[0], "D": 16, "dtype": str(dtype), "q_multiple": c,
                "equal_scores_row": row, "seed": ex.seed}
        state = _partial(ex, q, k, v, mask, case)
        judged += _judged_states(ex, state.value, q, k, v, mask, case, state.call)
        states = _chunk_states(ex, q, k, v, mask, cuts, case)
        merged = _merge_tree(ex, states, rng, case, "random")
        judged += _judged_states(ex, merged, q, k, v, mask, case | {"cuts": cuts},
                                    f"the {len(cuts) - 1} chunk states merged", cuts=cuts, states=states)
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)



def _far_qkv(dtype):
    """q, k, v whose scaled scores in each row sit near its own offset in [-1e4, 1e4]: the first
    row far below 0 (exp of every score underflows), the second far above (it overflows)."""
    def make(rng, T, n):
        offsets = rng.uniform(-1e4, 1e4, T)
        offsets[:2] = [-rng.uniform(800, 1e4), rng.uniform(800, 1e4)][:T]
        q, k = offset_scores(rng, offsets, n, odd_size(rng, 3, 20), dtype)
        return q, k, rng.standard_normal(k.shape).astype(dtype)
    return make


def _far_beside_float32(ex, rng) -> list:
    """[(case, answer)] of one partial_attention call with float32 q over float64 k, v (float inputs may be
    either; precision follows the lowest) whose keys no query may see hold 1e39 .. 1e300 in half their
    entries: finite, so allowed, but inf once cast down to q's float32 (then 0 * inf = NaN). The dtype of
    a mixed call's state is not judged: the prompt fixes it for float32 in or float64 in only."""
    T, n = odd_size(rng, 3, 20), odd_size(rng, 20, 90)
    q, k, v = _far_qkv(F32)(rng, T, n)
    k, v = k.astype(F64), v.astype(F64)
    mask = _mask(rng, T, n, share=rng.uniform(0.2, 0.8))
    mask[:, rng.choice(n, n // 4, replace=False)] = False
    mask[~mask.any(axis=1), 0] = True  # every row sees a key: the far rows (0 and 1) must
    unseen = ~mask.any(axis=0)
    for x in (k, v):
        x[unseen] = garbage(rng, x[unseen].shape, F64, beyond_float32=True)
    case = {"T": T, "n": n, "D": q.shape[1], "dtype": "float32 q, float64 k and v",
            "keys no query may see": int(unseen.sum()), "seed": ex.seed}
    state = _partial(ex, q, k, v, mask, case, as_given=True)
    return _judged_states(ex, state.value, q, k, v, mask, case, state.call)


def check_far_scores_attention(ex):
    """Rows whose scaled scores all lie far from 0 (-1e4 to 1e4), keys no query may see holding any finite value;
    float32 queries over float64 keys too, whose unseen slots hold values float32 cannot (1e39 .. 1e300)."""
    rng, judged = ex.rng, []
    for dtype in (F32, F64):
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, qkv=_far_qkv(dtype))
        for row in (0, 1):  # the far rows see something
            mask[row, int(rng.integers(0, k.shape[0]))] |= not mask[row].any()
        unseen = ~mask.any(axis=0)
        k[unseen], v[unseen] = garbage(rng, k[unseen].shape, dtype), garbage(rng, v[unseen].shape, dtype)
        case = {"T": q.shape[0], "n": k.shape[0], "D": q.shape[1], "dtype": str(dtype), "cuts": cuts,
                "keys no query may see": int(unseen.sum()), "seed": ex.seed}
        state = _partial(ex, q, k, v, mask, case)
        judged += _judged_states(ex, state.value, q, k, v, mask, case, state.call)
        chunks = _chunk_states(ex, q, k, v, mask, cuts, case)
        merged = _merge_tree(ex, chunks, rng, case, "left")
        judged += _judged_states(ex, merged, q, k, v, mask, case, f"the {len(cuts) - 1} chunk states merged",
                                 cuts=cuts, states=chunks)
    judged += _far_beside_float32(ex, rng)
    _settle(ex, judged, diagnosis.explain_attention, _attention_message)


# ---- numpy warnings -----------------------------------------------------------------------

def _quiet_miss(reply, case, situation, empty_rows=True):
    """A Miss when numpy warned during the call (None when quiet). On empty rows, a warning with
    NaN fits nan_on_fully_masked_row, one with the right values warns_on_empty_row. A NaN miss
    sorts first: it is the one to report."""
    if not reply.warnings:
        return None
    values = reply.value if isinstance(reply.value, (tuple, list)) else (reply.value,)
    has_nan = any(np.isnan(np.asarray(x, dtype=np.float64)).any() for x in values)
    found = []
    if empty_rows and has_nan:
        found = [("nan_on_fully_masked_row",
                  f"{reply.call} on {situation} returned NaN and numpy warned \"{reply.warnings[0]}\"")]
    elif empty_rows:
        found = [("warns_on_empty_row",
                  f"{reply.call} on {situation} gave the right values but numpy warned \"{reply.warnings[0]}\": "
                  "the NaN is computed and then replaced; guard the -inf - (-inf) case before it happens")]
    more = f" (and {len(reply.warnings) - 1} more)" if len(reply.warnings) > 1 else ""
    did = "returned NaN and raised" if has_nan else "raised"  # the kind says nan: the message says why
    return Miss(0 if has_nan else 1, f"{reply.call} on {situation} {did} a numpy warning: \"{reply.warnings[0]}\""
                f"{more}; the contract promises none", case, kind="nan" if has_nan else "hygiene", found=found)


def check_quiet_on_empty_rows(ex):
    """No numpy warning from any function on rows with nothing allowed, empty chunks or empty states."""
    rng, misses = ex.rng, []
    for dtype in (F32, F64):
        case = {"dtype": str(dtype), "seed": ex.seed}
        scores, mask = _softmax_with_empty_rows(rng, dtype)
        misses.append(_quiet_miss(_softmax(ex, scores, mask, case), case, "rows with nothing allowed"))
        q, k, v, mask, case = _attention_case(ex, dtype, T=(5, 30), n=(3, 60), D=(3, 30), empty=1 / 3)
        T, D = q.shape
        masked = _partial(ex, q, k, v, mask, case)
        misses.append(_quiet_miss(masked, case, "query rows that see no key"))
        nothing = oracle.empty_state(T, D, dtype)
        steps = [(_partial(ex, q, k[:0], v[:0], mask[:, :0], case), "an empty chunk (n = 0)"),
                 (_merge(ex, nothing, nothing, case, "merge_partials(empty, empty)"), "two empty states"),
                 (_merge(ex, nothing, masked.value, case, "merge_partials(empty, state)"),
                  "the empty state and rows that saw nothing"),
                 (_merge(ex, masked.value, masked.value, case, "merge_partials(state, state)"),
                  "two states with the same rows masked"),
                 (_finalize(ex, nothing, case, "finalize(empty)"), "the empty state (nothing seen)"),
                 (_finalize(ex, masked.value, case), "rows that saw nothing")]
        misses += [_quiet_miss(reply, case, situation) for reply, situation in steps]
    settle(ex, misses)


def check_quiet_on_large_logits(ex):
    """No numpy warning (overflow, invalid value) from any function on scores of +-1e4 and beyond."""
    rng, misses = ex.rng, []
    for dtype, c in [(F32, 8.0), (F64, 2.0 ** 40)]:
        case = {"dtype": str(dtype), "seed": ex.seed}
        scores, mask = _large_logit_scores(rng, dtype)
        misses.append(_quiet_miss(_softmax(ex, scores, mask, case), case, "huge scores", empty_rows=False))
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, qkv=_exact_large_qkv(dtype, c), gaps=False)
        mask[:] = True  # every chunk row sees keys: only the size of the scores is on trial here
        case |= {"T": q.shape[0], "n": k.shape[0], "D": 16, "q_multiple": c, "cuts": cuts}
        states = [_partial(ex, q, k[a:b], v[a:b], mask[:, a:b], case) for a, b in zip(cuts, cuts[1:])]
        misses += [_quiet_miss(reply, case, "huge scaled scores", empty_rows=False) for reply in states]
        acc = states[0].value
        for reply in states[1:]:
            merged = _merge(ex, acc, reply.value, case)
            misses.append(_quiet_miss(merged, case, "states of huge scores", empty_rows=False))
            acc = merged.value
        misses.append(_quiet_miss(_finalize(ex, acc, case), case, "a state of huge scores", empty_rows=False))
    settle(ex, misses)


# ---- validation -----------------------------------------------------------------------------

def check_rejects_the_invalid_case_shown(ex):
    """The invalid call the public tests show raises ValueError (in a live grading too)."""
    expect_rejected(ex, ex.candidate.masked_softmax, np.zeros((2, 3)), np.ones((2, 4), bool),
                    call="masked_softmax(scores [2, 3], mask [2, 4])", diagnosis="accepts_bad_shapes", why=SHOWN)


def _broadcast_misfits(rng):
    """(function, arguments, call) for every array argument of every function, in turn given a shape
    that disagrees with another argument's only in a way numpy broadcasts (``checking.misfit_calls``)."""
    size = dict(zip(["A", "T", "n", "D", "Dv"], (int(x) for x in rng.choice(np.arange(3, 14), 5, replace=False))))

    def make(kind):
        return lambda names: {"f": lambda s: rng.standard_normal(s), "b": lambda s: rng.random(s) < 0.7,
                              "l": lambda s: rng.uniform(0.5, 2.0, s)}[kind]([size[x] for x in names])

    state_axes, state_kinds = [("T",), ("T",), ("T", "Dv")], "flf"  # a state's width is its own
    functions = [  # name, argument names, axes, kinds (f float, b bool, l positive), the call's arguments
        ("masked_softmax", ["scores", "mask"], [("A", "T", "n")] * 2, "fb", lambda a: a),
        ("partial_attention", ["q", "k", "v", "mask"], [("T", "D"), ("n", "D"), ("n", "D"), ("T", "n")], "fffb",
         lambda a: a),  # v [n, D]: its width is q's, though p @ v works at any width
        ("merge_partials", ["a.m", "a.l", "a.o", "b.m", "b.l", "b.o"], state_axes * 2, state_kinds * 2,
         lambda a: (tuple(a[:3]), tuple(a[3:]))),
        ("finalize", ["m", "l", "o"], state_axes, state_kinds, lambda a: (tuple(a),)),
    ]
    for name, arg_names, axes, kinds, pack in functions:
        arrays = [make(kind)(names) for kind, names in zip(kinds, axes)]
        yield from misfit_calls(name, arg_names, axes, arrays, pack)


def _value_widths(rng):
    """(function, arguments, call): partial_attention with v narrower, then wider, than q's D (a width of 1
    is the broadcast misfits'): the prompt's v [n, D]."""
    T, n, D = (int(x) for x in rng.choice(np.arange(3, 14), 3, replace=False))
    for width in (int(rng.integers(2, D)), int(rng.integers(D + 1, 2 * D + 1))):
        yield ("partial_attention", (rng.standard_normal((T, D)), rng.standard_normal((n, D)),
                                     rng.standard_normal((n, width)), rng.random((T, n)) < 0.7),
               f"partial_attention(q [{T}, {D}], k [{n}, {D}], v [{n}, {width}], mask [{T}, {n}])")


def check_rejects_bad_shapes(ex):
    """Shapes that do not fit together raise ValueError, even where numpy would broadcast them: every array
    argument of every function in turn with a shared axis of 1, its leading axis dropped or a leading 1 added;
    values narrower or wider than q's D."""
    rng = ex.rng
    f = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    b = lambda *shape: np.ones(shape, bool)  # noqa: E731
    state4, state1 = oracle.empty_state(4, 8, F64), oracle.empty_state(1, 8, F64)
    cases = [
        ("masked_softmax", (f(4, 6), b(4, 1)), "masked_softmax(scores [4, 6], mask [4, 1])"),
        ("masked_softmax", (f(4, 6), b(6)), "masked_softmax(scores [4, 6], mask [6])"),
        ("partial_attention", (f(3, 8), f(5, 8), f(5, 8), b(1, 5)),
         "partial_attention(q [3, 8], k [5, 8], v [5, 8], mask [1, 5])"),
        ("partial_attention", (f(8), f(5, 8), f(5, 8), b(5)),
         "partial_attention(q [8], k [5, 8], v [5, 8], mask [5])"),
        ("partial_attention", (f(3, 8), f(5, 7), f(5, 8), b(3, 5)),
         "partial_attention(q [3, 8], k [5, 7], v [5, 8], mask [3, 5])"),
        ("merge_partials", (state4, state1), "merge_partials(state with T = 4, state with T = 1)"),
        ("merge_partials", (state4, oracle.empty_state(4, 1, F64)),
         "merge_partials(state with o [4, 8], state with o [4, 1])"),  # m and l agree: only o's width differs
        ("merge_partials", (oracle.empty_state(4, 1, F64), state4),
         "merge_partials(state with o [4, 1], state with o [4, 8])"),
    ]
    broadcast = "numpy broadcast the mismatched shapes and a caller's bug turned into a plausible-looking answer"
    wide = "p @ v works at any width of v, and a caller's bug turned into a plausible-looking answer"
    for name, args, call, why in ([(*c, broadcast) for c in cases + list(_broadcast_misfits(rng))]
                                  + [(*c, wide) for c in _value_widths(rng)]):
        expect_rejected(ex, getattr(ex.candidate, name), *args, call=call, diagnosis="accepts_bad_shapes",
                        why=why, case={"seed": ex.seed})
