"""Hidden checks for nan_safe_softmax. Each ``check_*`` is one stable check id (without the prefix).

Value checks judge values only; the two ``quiet_*`` checks judge the numpy warnings raised
during the same kinds of calls (the contract promises none), so a submission whose values are
right but that computes NaN and patches it afterwards is told apart from one that returns NaN.
States are judged by what they mean: ``finalize``'s output and the log-sum-exp m + log(l).
"""
from dataclasses import dataclass

import numpy as np

from grader.checking import describe, expect_array, expect_rejected, fail, measure, odd_size
from grader.sandbox import CandidateRaised

from . import diagnosis, oracle

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _atol(dtype) -> float:
    """Output tolerance: float32 rounding over a few hundred terms and merges, or float64's."""
    return 2e-5 if np.dtype(dtype) == F32 else 1e-10


def _rtol(dtype) -> float:
    return 1e-5 if np.dtype(dtype) == F32 else 1e-11


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

def _softmax(ex, scores, mask, case) -> Reply:
    call = f"masked_softmax(scores {_text(scores)}, mask {_text(mask)})"
    value, warnings = _call(ex, "masked_softmax", scores, mask)
    return Reply(expect_array(value, call=call, shape=scores.shape, kind="f", case=case), call, warnings)


def _expect_state(value, call, T, D, case):
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        fail(f"{call} returned {describe(value)}; expected a tuple (m [T], l [T], o [T, D]) with T = {T}, D = {D}",
             case)
    m = expect_array(value[0], call=f"{call} -> m", shape=(T,), kind="f", case=case)
    l = expect_array(value[1], call=f"{call} -> l", shape=(T,), kind="f", case=case)
    o = expect_array(value[2], call=f"{call} -> o", shape=(T, D), kind="f", case=case)
    return m, l, o


def _partial(ex, q, k, v, mask, case) -> Reply:
    call = f"partial_attention(q {_text(q)}, k {_text(k)}, v {_text(v)}, mask {_text(mask)})"
    value, warnings = _call(ex, "partial_attention", q, k, v, mask)
    return Reply(_expect_state(value, call, q.shape[0], v.shape[1], case), call, warnings)


def _merge(ex, a, b, case, call="merge_partials(a, b)") -> Reply:
    value, warnings = _call(ex, "merge_partials", tuple(a), tuple(b))
    return Reply(_expect_state(value, call, a[0].shape[0], a[2].shape[1], case), call, warnings)


def _finalize(ex, state, case, call="finalize(state)") -> Reply:
    T, D = state[2].shape
    value, warnings = _call(ex, "finalize", tuple(state))
    return Reply(expect_array(value, call=call, shape=(T, D), kind="f", case=case), call, warnings)


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


def _lse_off(m, l, want, dtype):
    """(row, got lse, expected lse) of the first row whose m + log(l) is off, or None."""
    got = oracle.state_lse(m, l)
    with np.errstate(invalid="ignore"):
        ok = (got == want) | (np.abs(got - want) <= _atol(dtype) + _rtol(dtype) * np.abs(want))
    if ok.all():
        return None
    row = int(np.flatnonzero(~ok)[0])
    return row, float(got[row]), float(want[row])


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

def _expect_softmax(ex, scores, mask, case, label=""):
    reply = _softmax(ex, scores, mask, case)
    want = oracle.masked_softmax(scores, mask)
    atol = _atol(scores.dtype)
    off = _first_off(reply.value, want, atol)
    if off is None:
        return reply
    index, got, expected = off
    allowed = int(mask[index[:-1]].sum())
    message = (f"{reply.call}{label}: entry {list(index)} is {_versus(got, expected)} "
               f"(that row allows {allowed} of {scores.shape[-1]} entries)")
    found = diagnosis.diagnose_softmax(reply.value, scores, mask, atol)
    if found:
        ex.diagnose(*found)
        message += f"; {found[1]}"
    fail(message, case=case, kind="nan" if np.isnan(got) else "wrong")


def check_softmax_dtype_and_shape(ex):
    """masked_softmax returns the shape and the floating dtype of scores (float32 stays float32)."""
    for shape in [(7,), (5, 13), (3, 4, 9)]:
        for dtype in (F32, F64):
            scores = ex.rng.standard_normal(shape).astype(dtype)
            mask = ex.rng.random(shape) < 0.6
            case = {"shape": list(shape), "dtype": str(dtype), "seed": ex.seed}
            reply = _softmax(ex, scores, mask, case)
            if reply.value.dtype != dtype:
                if dtype == F32 and reply.value.dtype == F64:
                    ex.diagnose("upcasts_float32", f"{reply.call} returned float64: float32 scores must give "
                                "float32 probabilities (a float64 scratch array or scalar promotes the result)")
                fail(f"{reply.call} returned {reply.value.dtype}; expected {dtype}, the dtype of scores", case,
                     kind="hygiene")


def check_softmax_random_rows(ex):
    """Random scores and masks (every row allows something), shapes not powers of two, match softmax."""
    rng = ex.rng
    shapes = [(1, 1), (3, 1)] + [(odd_size(rng, 2, 60), odd_size(rng, 3, 140)) for _ in range(4)]
    shapes += [(odd_size(rng, 2, 6), odd_size(rng, 2, 12), odd_size(rng, 3, 50)) for _ in range(2)]
    for shape in shapes:
        for dtype in (F32, F64):
            scores = (rng.standard_normal(shape) * rng.choice([0.1, 1.0, 8.0])).astype(dtype)
            rows = int(np.prod(shape[:-1]))
            mask = _mask(rng, rows, shape[-1], share=rng.uniform(0.1, 0.9)).reshape(shape)
            _expect_softmax(ex, scores, mask, {"shape": list(shape), "dtype": str(dtype), "seed": ex.seed})


def _softmax_with_empty_rows(rng, dtype):
    T, S = odd_size(rng, 5, 40), odd_size(rng, 3, 97)
    empty = rng.choice(T, size=max(1, T // 3), replace=False)
    scores = rng.standard_normal((T, S)).astype(dtype)
    return scores, _mask(rng, T, S, empty=empty)


def check_softmax_fully_masked_rows(ex):
    """Rows with nothing allowed give zeros (never NaN); the other rows are unaffected."""
    rng = ex.rng
    for dtype in (F32, F64):
        scores, mask = _softmax_with_empty_rows(rng, dtype)
        _expect_softmax(ex, scores, mask, {"shape": list(scores.shape), "dtype": str(dtype), "seed": ex.seed})
    scores = rng.standard_normal((2, 3, 11)).astype(F32)
    mask = rng.random((2, 3, 11)) < 0.5
    mask[1] = False  # a whole batch entry masked: padding
    _expect_softmax(ex, scores, mask, {"shape": [2, 3, 11], "dtype": "float32", "seed": ex.seed},
                    label=" (batch 1 fully masked)")


def _large_logit_scores(rng, dtype):
    """Rows of huge scores: mixed signs, all huge and equal, all hugely negative, all hugely positive."""
    sizes = [1e4, 3e4, 1e5, 1e10, 1e20] if dtype == F32 else [1e4, 1e5, 1e30, 1e100, 1e300]
    S = odd_size(rng, 5, 45)
    rows = []
    for big in sizes:
        rows.append(rng.choice([-big, big], S) * rng.uniform(0.5, 1.0, S))  # mixed signs
        rows.append(np.full(S, big))  # all equal: uniform over the allowed ones
        rows.append(-big + rng.uniform(0, 3, S))  # every allowed score far below 0
        rows.append(big - rng.uniform(0, 3, S))  # every allowed score far above 0
    scores = np.array(rows).astype(dtype)
    return scores, _mask(rng, len(rows), S, share=0.7)


def check_softmax_large_logits(ex):
    """Scores of +-1e4 and far beyond, in float32 and float64, give the right probabilities."""
    for dtype in (F32, F64):
        scores, mask = _large_logit_scores(ex.rng, dtype)
        _expect_softmax(ex, scores, mask, {"shape": list(scores.shape), "dtype": str(dtype), "seed": ex.seed})


def check_softmax_masked_entries_ignored(ex):
    """Whatever a masked entry holds (NaN, +inf, -inf, huge) has no effect on the result."""
    rng = ex.rng
    for dtype in (F32, F64):
        T, S = odd_size(rng, 5, 30), odd_size(rng, 5, 60)
        scores = rng.standard_normal((T, S)).astype(dtype)
        mask = _mask(rng, T, S, share=0.6, empty=[T - 1])
        held = np.array([np.nan, np.inf, -np.inf, np.finfo(dtype).max / 4, -np.finfo(dtype).max / 4], dtype)
        scores[~mask] = rng.choice(held, int((~mask).sum()))
        _expect_softmax(ex, scores, mask, {"shape": [T, S], "dtype": str(dtype), "seed": ex.seed},
                        label=" (masked entries hold NaN, inf and huge values)")


# ---- partial_attention / merge_partials / finalize --------------------------------------

def _expect_meaning(ex, state, q, k, v, mask, case, what, cuts=None, states=None):
    """The state means attention of q over (k, v, mask): finalize's output and m + log(l).

    For a state merged from chunks (``cuts``, their ``states`` in key order), a wrong answer is
    first traced to a wrong chunk state, if any, so that the merge is blamed only when due."""
    dtype = q.dtype
    want_out, want_lse = oracle.attention(q, k, v, mask)
    out = _finalize(ex, state, case, call=f"finalize({what})")
    atol = _atol(dtype)
    off = _first_off(out.value, want_out, atol)
    lse = _lse_off(state[0], state[1], want_lse, dtype)
    if (off is not None or lse is not None) and states is not None:
        _expect_chunks(ex, states, q, k, v, mask, cuts, case)
    if off is not None:
        (row, col), got, expected = off
        seen = int(mask[row].sum())
        message = (f"{out.call}: row {row}, column {col} is {_versus(got, expected)} "
                   f"(row {row} may see {seen} of {k.shape[0]} keys; T = {q.shape[0]}, D = {q.shape[1]})")
        found = diagnosis.diagnose_attention(out.value, q, k, v, mask, atol, cuts)
        if found:
            ex.diagnose(*found)
            message += f"; {found[1]}"
        elif cuts is not None and np.isnan(out.value).any():
            nan_row = int(np.argwhere(np.isnan(out.value))[0][0])
            ex.diagnose("nan_on_fully_masked_row",
                        f"every chunk state was right, but after merging, row {nan_row} is NaN: merging two "
                        "states that both saw nothing for a row rescales by "
                        "exp(-inf - (-inf)); a side with m = -inf must contribute nothing")
            message += "; the NaN appears only after merging (each chunk's state was right)"
        fail(message, case=case, kind="nan" if np.isnan(got) else "wrong")
    if lse is not None:
        row, got, expected = lse
        message = (f"{what}: m + log(l) of row {row} is {_g(got)}, expected the log-sum-exp of its scaled "
                   f"scores {_g(expected)} (m = {_g(float(state[0][row]))}, l = {_g(float(state[1][row]))})")
        if expected == -np.inf and np.isnan(got):
            ex.diagnose("nan_on_fully_masked_row",
                        f"{what}: row {row} saw no key, and its state holds m = {_g(float(state[0][row]))}, "
                        f"l = {_g(float(state[1][row]))}: exp(-inf - (-inf)) is NaN unless m = -inf is guarded")
        elif expected == -np.inf and np.isfinite(got):
            ex.diagnose("finite_mask_sentinel",
                        f"row {row} sees no key, yet its state has m = {_g(float(state[0][row]))}, "
                        f"l = {_g(float(state[1][row]))}: a finite fill stands in for -inf, so the state "
                        "claims keys were seen")
        fail(message, case=case, kind="nan" if np.isnan(got) else "wrong")
    return out.value


def check_state_dtype_and_shape(ex):
    """partial_attention returns (m [T], l [T], o [T, D]); merge and finalize keep the input dtype."""
    for dtype in (F32, F64):
        T, n, D = 5, 7, 3
        q, k, v = _qkv(ex.rng, T, n, D, dtype)
        mask = _mask(ex.rng, T, n)
        case = {"T": T, "n": n, "D": D, "dtype": str(dtype), "seed": ex.seed}
        first = _partial(ex, q, k, v, mask, case)
        both = _merge(ex, first.value, first.value, case, call="merge_partials(state, state)")
        out = _finalize(ex, both.value, case)
        for reply, arrays in [(first, first.value), (both, both.value), (out, [out.value])]:
            wrong = [a.dtype for a in arrays if a.dtype != dtype]
            if wrong:
                if dtype == F32 and F64 in wrong:
                    ex.diagnose("upcasts_float32",
                                f"{reply.call} returned float64 for float32 inputs: a float64 scalar such as "
                                "np.sqrt(D), or a float64 scratch array, promotes the result")
                fail(f"{reply.call} returned dtypes {[str(a.dtype) for a in arrays]}; expected {dtype} throughout",
                     case, kind="hygiene")


def check_one_chunk_attention(ex):
    """One chunk: finalize(partial_attention(...)) is masked attention with scale 1/sqrt(D), m + log(l) its LSE."""
    for _ in range(4):
        for dtype in (F32, F64):
            q, k, v, mask, case = _attention_case(ex, dtype, T=(2, 50), n=(3, 130), D=(3, 70),
                                                  share=ex.rng.uniform(0.2, 1.0))
            state = _partial(ex, q, k, v, mask, case)
            _expect_meaning(ex, state.value, q, k, v, mask, case, state.call)


def check_fully_masked_rows_attention(ex):
    """Query rows that may see no key of the chunk: output zeros, m + log(l) = -inf, no NaN."""
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, empty=1 / 3)
        state = _partial(ex, q, k, v, mask, case)
        _expect_meaning(ex, state.value, q, k, v, mask, case, state.call)
    q, k, v = _qkv(ex.rng, 6, 45, 9, F32)
    mask = np.zeros((6, 45), bool)  # a tile that no query may see
    case = {"T": 6, "n": 45, "D": 9, "dtype": "float32", "seed": ex.seed}
    state = _partial(ex, q, k, v, mask, case)
    _expect_meaning(ex, state.value, q, k, v, mask, case, state.call + " with mask all False")


def check_empty_chunk(ex):
    """A chunk of n = 0 keys is a state that saw nothing, and merging it changes nothing."""
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, T=(3, 30), n=(3, 60), D=(3, 30))
        n, case = k.shape[0], case | {"n": 0}
        try:
            empty = _partial(ex, q, k[:0], v[:0], mask[:, :0], case)
        except CandidateRaised as exc:
            ex.diagnose("crashes_on_empty_chunk",
                        f"partial_attention with n = 0 keys raised {exc.type_name} ({exc.message}): "
                        "the max over no keys needs an initial value of -inf (np.max(..., initial=-np.inf))")
            fail(f"partial_attention(q {_text(q)}, k {_text(k[:0])}, v {_text(v[:0])}, mask {_text(mask[:, :0])}) "
                 f"raised {exc.type_name}: {exc.message}; an empty chunk must give the empty state", case,
                 kind="crash")
        _expect_meaning(ex, empty.value, q, k[:0], v[:0], mask[:, :0], case, empty.call)
        full = _partial(ex, q, k, v, mask, case | {"n": n})
        for a, b in [(empty.value, full.value), (full.value, empty.value)]:
            merged = _merge(ex, a, b, case | {"n": n})
            _expect_meaning(ex, merged.value, q, k, v, mask, case | {"n": n},
                            "merge_partials of an empty chunk's state and a chunk's state")


def check_empty_state_is_identity(ex):
    """Merging with the empty state (m = -inf, l = 0, o = 0), on either side, changes nothing."""
    for dtype in (F32, F64):
        q, k, v, mask, case = _attention_case(ex, dtype, empty=1 / 4)
        (T, D), n = q.shape, k.shape[0]
        nothing = oracle.empty_state(T, D, dtype)
        state = _partial(ex, q, k, v, mask, case).value
        for a, b, what in [(nothing, state, "merge_partials(empty, state)"),
                           (state, nothing, "merge_partials(state, empty)")]:
            merged = _merge(ex, a, b, case, call=what)
            _expect_meaning(ex, merged.value, q, k, v, mask, case, what)
        both = _merge(ex, nothing, nothing, case, call="merge_partials(empty, empty)")
        none = np.zeros((T, n), bool)
        _expect_meaning(ex, both.value, q, k, v, none, case, both.call)


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


def _expect_chunks(ex, states, q, k, v, mask, cuts, case):
    """Each chunk's own state is right before any merging, so a later failure is the merge's."""
    for (a, b), state in zip(zip(cuts, cuts[1:]), states):
        _expect_meaning(ex, state, q, k[a:b], v[a:b], mask[:, a:b], case | {"chunk": [a, b]},
                        f"the state of chunk [{a}, {b})")


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
    """Keys in random chunks (some empty, some fully masked) merged in any order and tree shape equal one pass."""
    rng = ex.rng
    for trial, shape in enumerate(["left", "right", "random", "random"]):
        dtype = (F32, F64)[trial % 2]
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, scale=float(rng.choice([1.0, 3.0])))
        case = {"T": q.shape[0], "n": k.shape[0], "D": q.shape[1], "dtype": str(dtype), "cuts": cuts,
                "tree": shape, "seed": ex.seed}
        chunks = _chunk_states(ex, q, k, v, mask, cuts, case)
        states = list(chunks)
        if shape == "random":
            rng.shuffle(states)
        merged = _merge_tree(ex, states, rng, case, shape)
        _expect_meaning(ex, merged, q, k, v, mask, case,
                        f"the {len(cuts) - 1} chunk states merged ({shape} tree)", cuts=cuts, states=chunks)


def _exact_large_qkv(dtype, c):
    """q, k with small-integer entries times c, D = 16: every scaled score is exact in dtype."""
    def make(rng, T, n):
        D = 16
        q = (rng.integers(-40, 41, (T, D)) * c).astype(dtype)
        k = rng.integers(-40, 41, (n, D)).astype(dtype)
        return q, k, rng.standard_normal((n, D)).astype(dtype)
    return make


def check_large_logits_attention(ex):
    """Scaled scores around +-1e4 and far beyond, float32 and float64, in one chunk and merged."""
    rng = ex.rng
    for dtype, c in [(F32, 8.0), (F32, 2.0 ** 20), (F64, 2.0 ** 40)]:
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, qkv=_exact_large_qkv(dtype, c))
        case = {"T": q.shape[0], "n": k.shape[0], "D": 16, "dtype": str(dtype), "q_multiple": c, "seed": ex.seed}
        state = _partial(ex, q, k, v, mask, case)
        _expect_meaning(ex, state.value, q, k, v, mask, case, state.call)
        states = _chunk_states(ex, q, k, v, mask, cuts, case)
        merged = _merge_tree(ex, states, rng, case, "random")
        _expect_meaning(ex, merged, q, k, v, mask, case | {"cuts": cuts},
                        f"the {len(cuts) - 1} chunk states merged", cuts=cuts, states=states)


# ---- numpy warnings -----------------------------------------------------------------------

def _expect_quiet(ex, reply, case, situation, empty_rows=True):
    """Fail when numpy warned during the call; name the mistake when the rows were empty ones."""
    if not reply.warnings:
        return
    values = reply.value if isinstance(reply.value, (tuple, list)) else (reply.value,)
    has_nan = any(np.isnan(np.asarray(x, dtype=np.float64)).any() for x in values)
    if empty_rows and has_nan:
        ex.diagnose("nan_on_fully_masked_row",
                    f"{reply.call} on {situation} returned NaN and numpy warned \"{reply.warnings[0]}\"")
    elif empty_rows:
        ex.diagnose("warns_on_empty_row",
                    f"{reply.call} on {situation} gave the right values but numpy warned \"{reply.warnings[0]}\": "
                    "the NaN is computed and then replaced; guard the -inf - (-inf) case before it happens")
    more = f" (and {len(reply.warnings) - 1} more)" if len(reply.warnings) > 1 else ""
    fail(f"{reply.call} on {situation} raised a numpy warning: \"{reply.warnings[0]}\"{more}; "
         "the contract promises none", case, kind="nan" if has_nan else "hygiene")


def check_quiet_on_empty_rows(ex):
    """No numpy warning from any function on rows with nothing allowed, empty chunks or empty states."""
    rng = ex.rng
    for dtype in (F32, F64):
        case = {"dtype": str(dtype), "seed": ex.seed}
        scores, mask = _softmax_with_empty_rows(rng, dtype)
        _expect_quiet(ex, _softmax(ex, scores, mask, case), case, "rows with nothing allowed")
        q, k, v, mask, case = _attention_case(ex, dtype, T=(5, 30), n=(3, 60), D=(3, 30), empty=1 / 3)
        T, D = q.shape
        masked = _partial(ex, q, k, v, mask, case)
        _expect_quiet(ex, masked, case, "query rows that see no key")
        nothing = oracle.empty_state(T, D, dtype)
        steps = [(_partial(ex, q, k[:0], v[:0], mask[:, :0], case), "an empty chunk (n = 0)"),
                 (_merge(ex, nothing, nothing, case, "merge_partials(empty, empty)"), "two empty states"),
                 (_merge(ex, nothing, masked.value, case, "merge_partials(empty, state)"),
                  "the empty state and rows that saw nothing"),
                 (_merge(ex, masked.value, masked.value, case, "merge_partials(state, state)"),
                  "two states with the same rows masked"),
                 (_finalize(ex, nothing, case, "finalize(empty)"), "the empty state (nothing seen)"),
                 (_finalize(ex, masked.value, case), "rows that saw nothing")]
        for reply, situation in steps:
            _expect_quiet(ex, reply, case, situation)


def check_quiet_on_large_logits(ex):
    """No numpy warning (overflow, invalid value) from any function on scores of +-1e4 and beyond."""
    rng = ex.rng
    for dtype, c in [(F32, 8.0), (F64, 2.0 ** 40)]:
        case = {"dtype": str(dtype), "seed": ex.seed}
        scores, mask = _large_logit_scores(rng, dtype)
        _expect_quiet(ex, _softmax(ex, scores, mask, case), case, "huge scores", empty_rows=False)
        q, k, v, mask, cuts = _chunked_case(ex, rng, dtype, qkv=_exact_large_qkv(dtype, c), gaps=False)
        mask[:] = True  # every chunk row sees keys: only the size of the scores is on trial here
        case |= {"T": q.shape[0], "n": k.shape[0], "D": 16, "q_multiple": c, "cuts": cuts}
        states = [_partial(ex, q, k[a:b], v[a:b], mask[:, a:b], case) for a, b in zip(cuts, cuts[1:])]
        for reply in states:
            _expect_quiet(ex, reply, case, "huge scaled scores", empty_rows=False)
        acc = states[0].value
        for reply in states[1:]:
            merged = _merge(ex, acc, reply.value, case)
            _expect_quiet(ex, merged, case, "states of huge scores", empty_rows=False)
            acc = merged.value
        _expect_quiet(ex, _finalize(ex, acc, case), case, "a state of huge scores", empty_rows=False)


# ---- validation -----------------------------------------------------------------------------

def check_rejects_bad_shapes(ex):
    """Shapes that do not fit together raise ValueError, even where numpy would broadcast them."""
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
    ]
    for name, args, call in cases:
        expect_rejected(ex, getattr(ex.candidate, name), *args, call=call, diagnosis="accepts_bad_shapes",
                        why="numpy broadcast the mismatched shapes and a caller's bug turned into a "
                            "plausible-looking answer", case={"seed": ex.seed})

