"""Hidden checks for split_kv_decode. Each ``check_*`` is one stable check id (without the prefix).

Every value is compared with the oracle's dense attention over all keys at once; nothing here
trusts the candidate's own splits. A check tries all its cases, reports the smallest failing
one, and names a classic mistake only when that mistake explains every failing case.

| sentence (CONTRACT section 1, the exercise's section, the prompt) | checks |
|---|---|
| scaled scores anywhere in [-1e4, 1e4]; unseen slots hold any finite value | far_scores_and_unseen_slots |
| (beside float32 queries: float64 values float32 cannot hold) | far_scores_and_unseen_slots |
| float32 or float64 inputs; precision follows them | attention_with_lse_values, far_scores_and_unseen_slots |
| right values in another container or dtype: hire | every check (the plugin fails a check with slips as hygiene) |
| split sizes are a convention (another valid cover: hire, named); a wrong cover is weak | split_ranges_rule |
| attention_with_lse: normalised o, natural-log lse, scale 1/sqrt(D) | attention_with_lse_values |
| a row with no allowed key: o = 0, lse = -inf | attention_with_lse_empty |
| merge: lse = logsumexp, o weighted by exp(lse_i - lse) | merge_matches_all_keys, merge_in_any_order |
| a part with lse = -inf contributes nothing, even NaN; all empty: o = 0, lse = -inf | merge_empty_parts |
| stable for any finite lse (no overflow at 1e4) | merge_large_lse |
| split_ranges: num_splits ranges covering 0 .. S, sizes within one, longer first, S = 0 | split_ranges_rule |
| split_kv_attention = all keys at once | split_kv_contiguous, split_kv_ring_positions, split_kv_long_context |
| (section 1) positions are any int64 values: past 2^31 and 2^53, compared exactly | split_kv_ring_positions |
| (prompt) ring buffer: unsorted, holes; future keys in front of visible ones | split_kv_ring_positions |
| a negative key position (any, not only -1) marks an empty slot | split_kv_ring_positions, every ring case |
| shared_prefix_attention: whole prefix, own suffix causally, P = 0 | shared_prefix_values |
| no NaN or numpy warning | quiet_numpy (NaN: every value check) |
| invalid arguments raise ValueError (v [n, D]: values as wide as q) | rejects_invalid_arguments |
| (prompt) the splits are attended one at a time: peak memory | split_kv_memory_per_split |
| (section 1) calls in any order: the same arrays rewritten in place, the new answer | buffers_rewritten_in_place |

Held elsewhere: ownership, calls in any order with new argument objects, integer dtypes (the general
checks). Held by no check as such: "the prefix is computed once" (an interviewer reads the code).
"""
from dataclasses import dataclass
from functools import partial

import numpy as np

from grader.checking import (Miss, allowing_empty, expect_rejected, fail, garbage, in_usual_types, middle_reading,
                             measure, misfit_calls, odd_size, offset_scores, received, settle, slips_of, summarize)

from grader.held import Held

from . import diagnosis, oracle
from .diagnosis import Tol

# ---- calls, each validated for type and shape --------------------------------------------

def _text(x) -> str:
    x = np.asarray(x)
    return f"{x.dtype} {list(x.shape)}"


def _expect_part(value, call, T, D, case, slips=None):
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        fail(f"{call} returned {summarize(value)}; expected a tuple (o [T, D], lse [T]) with T = {T}, D = {D}", case)
    o = received(value[0], call=f"{call} -> o", shape=(T, D), kind="f", slips=slips, case=case)
    lse = received(value[1], call=f"{call} -> lse", shape=(T,), kind="f", slips=slips, case=case)
    return o, lse


def _attention(ex, q, k, v, mask, case):
    call = f"attention_with_lse(q {_text(q)}, k {_text(k)}, v {_text(v)}, mask {_text(mask)})"
    value = allowing_empty(ex, partial(ex.candidate.attention_with_lse, q, k, v, mask), empty=len(q) == 0, what=call,
                           stand_in=lambda: oracle.masked_attention(q, k, v, mask))
    return _expect_part(value, call, *q.shape, case, slips_of(ex)), call


def _merge(ex, o, lse, case):
    call = f"merge_states(o {_text(o)}, lse {_text(lse)})"
    return _expect_part(ex.candidate.merge_states(o, lse), call, *o.shape[1:], case, slips_of(ex)), call


def _split_kv(ex, q, k, v, q_pos, k_pos, n, case):
    call = (f"split_kv_attention(q {_text(q)}, k {_text(k)}, v {_text(v)}, q_positions {type(q_pos).__name__} "
            f"[{len(q_pos)}], k_positions {type(k_pos).__name__} [{len(k_pos)}], num_splits={n!r})")
    value = allowing_empty(ex, partial(ex.candidate.split_kv_attention, q, k, v, q_pos, k_pos, n),
                           empty=len(q) == 0 or len(k) == 0, what=call,
                           stand_in=lambda: (np.zeros(q.shape), np.full(len(q), -np.inf)))
    return _expect_part(value, call, *q.shape, case, slips_of(ex)), call


def _shared_prefix(ex, q, prefix_k, prefix_v, suffix_k, suffix_v, case):
    call = (f"shared_prefix_attention(q {_text(q)}, prefix_k {_text(prefix_k)}, prefix_v {_text(prefix_v)}, "
            f"suffix_k {_text(suffix_k)}, suffix_v {_text(suffix_v)})")
    got = ex.candidate.shared_prefix_attention(q, prefix_k, prefix_v, suffix_k, suffix_v)
    return received(got, call=call, shape=q.shape, kind="f", slips=slips_of(ex), case=case), call


# ---- comparisons -------------------------------------------------------------------------

def _g(x) -> str:
    return f"{float(x):.6g}"


def _compare(got, want, tol, call, case, size, found=(), row_name=lambda r: f"query {r}") -> Miss | None:
    """None when (o, lse) match the oracle; else a Miss naming the first wrong query and what it got."""
    (g_o, g_lse), (w_o, w_lse) = got, want
    bad = diagnosis.off_rows(g_o, g_lse, w_o, w_lse, tol)
    if not bad.any():
        return None
    row = int(np.flatnonzero(bad)[0])
    sees = "sees no key" if w_lse is not None and w_lse[row] == -np.inf else "sees keys"
    if w_lse is not None and not diagnosis.close(g_lse[row], w_lse[row], tol.lse):
        what = f"lse = {_g(g_lse[row])}, expected {_g(w_lse[row])}"
    else:
        col = int(np.flatnonzero(~diagnosis.close(g_o[row], w_o[row], tol.o))[0])
        what = f"o = {_g(g_o[row, col])} in dimension {col}, expected {_g(w_o[row, col])}"
    nan = any(np.isnan(np.asarray(x, np.float64)).any() for x in got if x is not None)
    message = f"{call}: {row_name(row)} ({sees}) got {what}; {int(bad.sum())} of {len(bad)} queries wrong"
    return Miss(size, message, case, "nan" if nan else "wrong", list(found))




def _normal(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


def _mask(rng, T, n, empty_rows=1):
    """Random bool [T, n]; ``empty_rows`` random rows see nothing."""
    mask = rng.random((T, n)) < rng.uniform(0.2, 0.9)
    mask[rng.choice(T, size=min(empty_rows, T), replace=False)] = False
    return mask


# ---- attention_with_lse ------------------------------------------------------------------------

def _expect_attention(ex, q, k, v, mask, case) -> Miss | None:
    got, call = _attention(ex, q, k, v, mask, case)
    want = oracle.masked_attention(q, k, v, mask)
    tol = Tol.of((q, k, v), want)
    return _compare(got, want, tol, call, case, q.size + k.size,
                    diagnosis.explaining_attention(got, q, k, v, mask, want, tol))


def check_attention_with_lse_values(ex):
    """attention_with_lse gives exact attention and the natural-log log-sum-exp, T = 1 and T > 1."""
    rng, misses = ex.rng, []
    for T, dtype in [(1, np.float64), (odd_size(rng, 3, 30), np.float64), (odd_size(rng, 3, 30), np.float64),
                     (odd_size(rng, 3, 30), np.float32)]:
        n, D = odd_size(rng, 5, 200), odd_size(rng, 3, 40)
        q, k, v = (_normal(rng, *s).astype(dtype) for s in [(T, D), (n, D), (n, D)])
        mask = _mask(rng, T, n, empty_rows=int(T > 1))
        mask[T - 1, rng.integers(0, n)] = True  # at least one row that sees a key
        misses.append(_expect_attention(ex, q, k, v, mask, {"T": T, "n": n, "D": D, "dtype": np.dtype(dtype).name,
                                                            "seed": ex.seed}))
    settle(ex, misses)


def check_attention_with_lse_empty(ex):
    """Rows that see no key and chunks with no keys give o = 0 and lse = -inf, never NaN or +inf; no
    queries at all (T = 0, over no keys or some) give o [0, D] and lse [0]."""
    rng, misses = ex.rng, []
    T, D = odd_size(rng, 3, 20), odd_size(rng, 3, 30)
    # the last two, T = 0: the contract sets no lower bound
    for n, mask in [(0, np.zeros((T, 0), bool)), (37, np.zeros((T, 37), bool)), (41, _mask(rng, T, 41, T // 2)),
                    (0, np.zeros((0, 0), bool)), (29, np.zeros((0, 29), bool))]:
        q, k, v = _normal(rng, len(mask), D), _normal(rng, n, D), _normal(rng, n, D)
        misses.append(_expect_attention(ex, q, k, v, mask, {"T": len(q), "n": n, "D": D, "seed": ex.seed}))
    settle(ex, misses)


# ---- merge_states --------------------------------------------------------------------------

@dataclass
class Parts:
    """N parts over disjoint key sets, as the oracle computes them, and the answer over all keys."""
    o: np.ndarray  # [N, T, D]
    lse: np.ndarray  # [N, T]
    want: tuple
    case: dict


def _parts(rng, N, T, n, D, seed, scale=1.0, garbage=False, negative=False) -> Parts:
    """Keys dealt to N parts at random (not contiguous); part 0 gets no key and another part is
    masked for every query; with ``garbage``, the o of empty rows holds NaN and huge values.
    Scores are about ``scale`` in size; with ``negative`` every score is about -scale * sqrt(D)."""
    q, k, v = _normal(rng, T, D, scale=scale), _normal(rng, n, D), _normal(rng, n, D)
    if negative:
        q, k = np.full((T, D), scale), -1.0 - 0.1 * np.abs(k)
    mask = _mask(rng, T, n, empty_rows=1)
    owner = rng.integers(1, N, n) if N > 1 else np.zeros(n, int)
    if N > 2:
        mask[:, owner == int(rng.integers(1, N))] = False
    o, lse = zip(*[oracle.masked_attention(q, k[owner == p], v[owner == p], mask[:, owner == p]) for p in range(N)])
    o, lse = np.stack(o), np.stack(lse)
    if garbage:
        o[lse == -np.inf] = rng.choice([np.nan, 1e300, -np.inf], size=(int((lse == -np.inf).sum()), D))
    case = {"N": N, "T": T, "n": n, "D": D, "q_scale": scale, "garbage_in_empty_parts": garbage, "seed": seed}
    return Parts(o, lse, oracle.masked_attention(q, k, v, mask), case)


def _expect_merge(ex, parts: Parts, order=None, label="") -> Miss | None:
    order = np.arange(len(parts.lse)) if order is None else np.asarray(order)
    o, lse = parts.o[order], parts.lse[order]
    got, call = _merge(ex, o, lse, parts.case)
    tol = Tol.of((o, lse), parts.want, magnitude=float(np.max(np.abs(lse[np.isfinite(lse)]), initial=1.0)))
    case = parts.case | ({"order": order.tolist()} if label else {})
    return _compare(got, parts.want, tol, call + label, case, o.size,
                    diagnosis.explaining_merge(got, o, lse, parts.want, tol))


def check_merge_matches_all_keys(ex):
    """Merging N parts (N = 1 .. 13, some empty, some masked) equals attention over all their keys."""
    rng = ex.rng
    misses = [_expect_merge(ex, _parts(rng, N, odd_size(rng, 3, 25), odd_size(rng, 20, 300), odd_size(rng, 3, 40),
                                       ex.seed, scale=float(rng.choice([1.0, 4.0]))))
              for N in (1, 2, 3, 7, 13)]
    settle(ex, misses)


def check_merge_in_any_order(ex):
    """The same parts in any order (reversed, shuffled, largest first or last) merge to the same answer."""
    rng = ex.rng
    parts = _parts(rng, 7, odd_size(rng, 5, 20), odd_size(rng, 60, 300), odd_size(rng, 3, 30), ex.seed, scale=3.0)
    N = len(parts.lse)
    by_weight = np.argsort(parts.lse.max(axis=1))
    orders = [np.arange(N)[::-1], rng.permutation(N), rng.permutation(N), by_weight, by_weight[::-1]]
    settle(ex, [_expect_merge(ex, parts, order, f" with the parts in order {list(order)}") for order in orders])


def check_merge_empty_parts(ex):
    """Parts with lse = -inf change nothing, whatever their o holds; all parts empty give o = 0, lse = -inf."""
    rng, misses = ex.rng, []
    T, D = odd_size(rng, 3, 20), odd_size(rng, 3, 30)
    for N in (1, 4):
        o = rng.choice([0.0, np.nan, 7.0], size=(N, T, D))
        nothing = Parts(o, np.full((N, T), -np.inf), (np.zeros((T, D)), np.full(T, -np.inf)),
                        {"N": N, "T": T, "D": D, "every_part_empty": True, "seed": ex.seed})
        misses.append(_expect_merge(ex, nothing))
    misses.append(_expect_merge(ex, _parts(rng, 5, T, odd_size(rng, 20, 120), D, ex.seed, garbage=True)))
    settle(ex, misses)


def _scaled_parts(rng, N, magnitude, seed) -> Parts:
    """Parts whose lse are about ``magnitude``: q scaled up (scores of both signs, the largest near
    +magnitude), or for a negative magnitude every score near it."""
    D = 9
    parts = _parts(rng, N, odd_size(rng, 3, 15), odd_size(rng, 30, 150), D, seed, scale=abs(magnitude) / 3,
                   negative=magnitude < 0)
    seen = parts.lse[np.isfinite(parts.lse)]
    parts.case["lse_range"] = [float(seen.min()), float(seen.max())]
    return parts


def check_merge_large_lse(ex):
    """lse of magnitude 30 up to 1e4, positive and negative: no overflow, no underflow, no NaN."""
    rng = ex.rng
    settle(ex, [_expect_merge(ex, _scaled_parts(rng, N, magnitude, ex.seed))
                 for N, magnitude in [(3, 30.0), (5, 1e3), (7, 1e4), (4, -1e4 / 1.1)]])


# ---- split_ranges ------------------------------------------------------------------------------

def _range_pairs(rng):
    """(S, num_splits): 1, 2, 7, S - 1, S and more than S splits, S = 0, S not divisible, sizes past
    2^16, and S past 2^53 up to 2^63 - 1 with split counts that are not powers of two (float64 holds
    neither S nor S / num_splits exactly there: the cover is judged in Python ints). num_splits stays
    small: the answer holds num_splits pairs. Python ints only: numpy integers are the general
    integer-type check's, which replays these calls retyped and blames the type only when the
    Python ints were answered."""
    S1, S2 = odd_size(rng, 10, 500), odd_size(rng, 70_000, 140_000)
    huge = [(2**54 + (odd_size(rng, 1, 99) | 1), 3), (2**60 + (odd_size(rng, 1, 99) | 1), 7),
            (2**62 + (odd_size(rng, 1, 2**40) | 1), odd_size(rng, 100, 500)), (2**63 - 1, 3),
            (2**63 - 1, odd_size(rng, 500, 1500))]
    return [(0, 1), (0, 5), (1, 1), (1, 3), (S1, 1), (S1, 2), (S1, 7), (7 * S1 + 3, 7), (S1, S1 - 1), (S1, S1),
            (S1, S1 + 6), (S2, 37), (S2, 1000), (S2, 7), (S1, 3), *huge]


def _ranges_miss(call, got, want, case, found) -> Miss:
    first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    shown = got[first] if first < len(got) else "missing"
    expected = want[first] if first < len(want) else "no range"
    more = " ..." if len(want) > 4 else ""
    return Miss(case["S"] + case["num_splits"], f"{call} returned {len(got)} ranges; range {first} is {shown}, "
                f"expected {expected} (the ranges start {want[:4]}{more})", case, found=found)


def _ranges_reply(got, call, n, case, slips):
    """The candidate's ranges as [(start, stop)]: a list or tuple of pairs, or (a slip) an int array [n, 2]."""
    if isinstance(got, np.ndarray) and got.shape == (n, 2) and got.dtype.kind in "iu":
        slips.append(f"{call} returned an {got.dtype} array of the right ranges; expected a list of (start, stop)")
        got = got.tolist()
    if not isinstance(got, (list, tuple)) or not all(isinstance(r, (list, tuple)) and len(r) == 2 for r in got):
        fail(f"{call} returned {summarize(got)}; expected a list of {n} (start, stop) pairs", case)
    return [(int(a), int(b)) for a, b in got]


def check_split_ranges_rule(ex):
    """split_ranges gives num_splits contiguous ranges covering 0 .. S, sizes within one, longer first,
    for S from 0 up to 2^63 - 1 (compared exactly)."""
    misses = []
    for S, n in _range_pairs(ex.rng):
        call = f"split_ranges({S!r}, {n!r})"
        case = {"S": int(S), "num_splits": int(n), "seed": ex.seed}
        got = _ranges_reply(ex.candidate.split_ranges(S, n), call, int(n), case, slips_of(ex))
        want = oracle.ranges(int(S), int(n))
        if got == want:
            continue
        if not oracle.is_cover(got, int(S), int(n)):  # a wrong cover is a wrong answer
            misses.append(_ranges_miss(call, got, want, case, diagnosis.explaining_ranges(got, int(S), int(n))))
            continue
        found = diagnosis.naming_convention(got, int(S), int(n))  # any other valid cover: a convention
        misses.append(Miss(case["S"] + case["num_splits"], f"{call} returned a valid cover of 0 .. {int(S)} with "
                           f"range sizes {[b - a for a, b in got][:8]}, not this kit's (sizes within one, longer "
                           f"first: {[b - a for a, b in want][:8]})", case, kind="hygiene",
                           found=found))
    settle(ex, misses)


# ---- split_kv_attention ------------------------------------------------------------------------

@dataclass
class KV:
    """Queries and a cache: q [T, D], k and v [S, D], absolute positions (-1 = empty slot)."""
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_pos: np.ndarray
    k_pos: np.ndarray
    label: str

    def case(self, seed, n):
        return {"T": len(self.q), "S": len(self.k), "D": self.q.shape[1], "num_splits": int(n),
                "cache": self.label, "seed": seed}


def _decode(rng, T, S, D) -> KV:
    """The newest T tokens of an S-token sequence (already in the cache) attend over it."""
    return KV(_normal(rng, T, D), _normal(rng, S, D), _normal(rng, S, D), np.arange(S - T, S), np.arange(S),
              f"contiguous, queries are the last {T} of {S}")


def _ring(rng, T, capacity, written, D, holes, gap=0) -> KV:
    """A ring buffer of ``capacity`` slots after ``written`` tokens: token p sits in slot p % capacity,
    unwritten slots and ``holes`` more are empty (any negative position, see _empty_marks). Queries are
    the newest T tokens, plus, when T > 2, one early position that sees no stored key. With ``gap`` > 0
    the queries are instead T consecutive tokens ending ``gap`` before the newest, so the cache also holds keys in their
    future (verifying earlier drafts, a query replayed): keys past every query sit in front of visible
    ones in slot order, and the queries' positions and the one after them are never holes (read
    through any rounding, a future key next to a query becomes visible)."""
    k_pos = np.full(capacity, -1, dtype=np.int64)
    newest = np.arange(max(0, written - capacity), written, dtype=np.int64)
    k_pos[newest % capacity] = newest
    q_pos = np.arange(written - gap - T, written - gap, dtype=np.int64)
    kept = np.isin(k_pos, np.arange(q_pos[0], q_pos[-1] + 2)) if gap else np.zeros(capacity, bool)
    k_pos[rng.choice(np.flatnonzero(~kept), size=holes, replace=False)] = -1
    empty = np.flatnonzero(k_pos < 0)
    k_pos[empty] = _empty_marks(rng, len(empty))
    if T > 2 and written > capacity and not gap:
        q_pos[0] = int(rng.integers(0, written - capacity))  # before every stored key: sees nothing
    where = f"queries end {gap} before the newest, " if gap else ""
    return KV(_normal(rng, T, D), _normal(rng, capacity, D), _normal(rng, capacity, D), q_pos, k_pos,
              f"ring buffer of {capacity} slots after {written} tokens, {where}{holes} holes")


def _empty_marks(rng, n: int) -> np.ndarray:
    """``n`` positions of empty slots: "a negative key position marks an empty cache slot", so not only -1.
    About half are -1, the rest any other negative int64, INT64_MIN among them."""
    marks = np.where(rng.random(n) < 0.5, -1, rng.integers(-(2**31), -1, size=n)).astype(np.int64)
    marks[rng.random(n) < 0.1] = np.iinfo(np.int64).min
    if n >= 2:  # at least one mark that is not -1, whatever the draw
        marks[int(rng.integers(n))] = -2
    return marks


def _dense(kv: KV) -> tuple:
    """(the oracle's answer, its tolerance) for ``kv``: attention over all keys at once."""
    want = oracle.positional_attention(kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos)
    return want, Tol.of((kv.q, kv.k, kv.v), want)


def _expect_split_kv(ex, kv: KV, n, as_lists=False, dense=None) -> Miss | None:
    """Compare with attention over all keys; positions go as lists when ``as_lists``. ``dense``:
    ``_dense(kv)`` computed once for the same cache asked with several split counts."""
    case = kv.case(ex.seed, n)
    positions = (kv.q_pos.tolist(), kv.k_pos.tolist()) if as_lists else (kv.q_pos, kv.k_pos)
    usual = partial(_split_kv, ex, kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos, n, case)
    given = partial(_split_kv, ex, kv.q, kv.k, kv.v, *positions, n, case)
    got, call = in_usual_types(given, usual, sent=positions, what="split_kv_attention with list positions")
    want, tol = dense or _dense(kv)
    if diagnosis.off_rows(*got, *want, tol).any():
        found = diagnosis.explaining_split_kv(got, kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos, int(n), want, tol)
        return _compare(got, want, tol, f"{call} [{kv.label}]", case, kv.q.size + kv.k.size, found)
    return None


def _split_counts(rng, S):
    """1, 2, 7, S - 1, S and more than S, each once and at least 1."""
    return list(dict.fromkeys(n for n in [1, 2, 7, S - 1, S, S + int(rng.integers(1, 9))] if n >= 1))


def _every_split_count(ex, kv: KV) -> list:
    """kv under every split count; the 2 splits with list positions. The answer is the same for
    every count (splits change nothing): the oracle computes it once."""
    dense = _dense(kv)
    return [_expect_split_kv(ex, kv, n, as_lists=n == 2, dense=dense)
            for n in _split_counts(ex.rng, len(kv.k))]


def check_split_kv_contiguous(ex):
    """Decode over a contiguous cache: 1, 2, 7, S - 1, S and more than S splits equal attention over all keys;
    no queries (T = 0) give o [0, D] and lse [0]."""
    rng = ex.rng
    D = odd_size(rng, 3, 24)
    caches = [_decode(rng, 1, odd_size(rng, 40, 300), D), _decode(rng, odd_size(rng, 3, 12), odd_size(rng, 40, 300), D),
              _decode(rng, 1, 1, D), _decode(rng, 11, 11, D),  # one key; prefill, T = S
              _decode(rng, 0, odd_size(rng, 20, 60), D)]  # T = 0: the contract sets no lower bound
    settle(ex, [miss for kv in caches for miss in _every_split_count(ex, kv)])


def check_split_kv_ring_positions(ex):
    """Ring-buffer positions (unsorted, empty slots, splits that see nothing, S = 0, positions past 2^31
    and 2^53, keys in the future of every query stored in front of visible ones) equal attention over
    all keys."""
    rng, misses = ex.rng, []
    far = [2**31 + odd_size(rng, 3, 200), 2**53 + odd_size(rng, 3, 200)]  # int32 wraps; float64 merges neighbours
    for T, capacity, written, holes in [(5, 61, 200, 7), (1, 97, 97, 11), (6, 45, 30, 4), (4, 50, 0, 0), (3, 0, 0, 0),
                                        (5, 41, far[0], 5), (4, 37, far[1], 3)]:
        kv = _ring(rng, T, capacity, written, odd_size(rng, 3, 20), holes)
        if written == 0:
            kv.q_pos = np.array([0, 3, 5, 9][:T])  # nothing stored yet: every query sees nothing
        if capacity:
            misses += _every_split_count(ex, kv)
        else:
            dense = _dense(kv)
            misses += [_expect_split_kv(ex, kv, n, dense=dense) for n in (1, 3)]
    # keys in the future of every query stored in front of visible ones, in three layouts: the queries'
    # next keys straddle the middle slot, the queries among the newest slots (8 consecutive ones past
    # 2^53, each with its next position stored: float64 rounds half of those pairs together), the
    # queries among the oldest slots. A scan that stops at the first future key, or bisects the slots,
    # assumes sorted positions.
    for T, capacity, base, layout in [(6, odd_size(rng, 40, 90), 0, "middle"), (8, odd_size(rng, 41, 60), 2**53, "new"),
                                      (5, odd_size(rng, 40, 90), 0, "old")]:
        if layout == "middle":
            wrap = int(rng.integers(capacity // 2 + 3, capacity - 3))
            gap = wrap - 1 - int(rng.integers(1, capacity // 2))  # the last query's slot is before the middle
        elif layout == "new":
            wrap = int(rng.integers(capacity // 4, 3 * capacity // 4))
            gap = int(rng.integers(2, capacity // 4))
        else:
            wrap = int(rng.integers(3, capacity // 3))
            gap = wrap + int(rng.integers(1, capacity // 3))
        written = base + capacity * int(rng.integers(2, 5))
        written += (wrap - written) % capacity  # the newest token sits in slot wrap - 1
        kv = _ring(rng, T, capacity, written, odd_size(rng, 3, 20), 4, gap=gap)
        misses += _every_split_count(ex, kv)
    settle(ex, misses)


def _expect_measured(ex, kv: KV, n, value, case, count=1) -> Miss | None:
    """The answer of a measured split_kv_attention call, compared like any other: ``count`` rows
    drawn at random and the last one (the oracle takes a tenth of a second per row at this S)."""
    call = f"split_kv_attention(T = {len(kv.q_pos)}, S = {len(kv.k_pos):,}, num_splits = {n}) [{kv.label}]"
    o, lse = _expect_part(value, call, *kv.q.shape, case)
    rows = np.unique(np.append(ex.rng.integers(0, len(kv.q), count), len(kv.q) - 1))
    got = o[rows], lse[rows]
    want = oracle.positional_attention(kv.q[rows], kv.k, kv.v, kv.q_pos[rows], kv.k_pos)
    tol = Tol.of((kv.q, kv.k, kv.v), want)
    if diagnosis.off_rows(*got, *want, tol).any():
        return _compare(got, want, tol, call, case, kv.q.size + kv.k.size)
    return None


def check_split_kv_long_context(ex):
    """Contexts of 70K-140K keys (positions past 2^16), contiguous and wrapped, with 37 and 1,000 splits."""
    rng = ex.rng
    S = odd_size(rng, 70_000, 90_000)
    contiguous = _decode(rng, 3, S, 5)
    wrapped = _ring(rng, 4, S, S + odd_size(rng, 30_000, 50_000), 5, 100)
    settle(ex, [_expect_split_kv(ex, contiguous, 37), _expect_split_kv(ex, wrapped, 1000, as_lists=True)])


def _far_offsets(rng, T):
    """Each query's scaled scores near its own offset in [-1e4, 1e4]: one far below 0, one far above."""
    offsets = rng.uniform(-1e4, 1e4, T)
    offsets[:2] = [-rng.uniform(800, 1e4), rng.uniform(800, 1e4)][:T]
    return offsets


def _unseen_hold_garbage(rng, k, v, unseen, beyond_float32=False):
    """Garbage in the unseen slots of k and v (``checking.garbage``; ``beyond_float32``: float64 keys beside
    float32 queries, some of it more than float32 holds)."""
    for x in (k, v):
        x[unseen] = garbage(rng, x[unseen].shape, x.dtype, beyond_float32)


def _dtypes_text(q_dtype, kv_dtype) -> str:
    q_name, kv_name = np.dtype(q_dtype).name, np.dtype(kv_dtype).name
    return q_name if q_name == kv_name else f"{q_name} q, {kv_name} k and v"


def check_far_scores_and_unseen_slots(ex):
    """Scaled scores from -1e4 to 1e4, float32, float64 and float32 queries over float64 keys, with keys no
    query may see holding any finite value (beside float32 queries, float64 values float32 cannot hold)."""
    rng, misses = ex.rng, []
    for dtype, kv_dtype in [(np.float32, np.float32), (np.float64, np.float64), (np.float32, np.float64)]:
        mixed, name = kv_dtype != dtype, _dtypes_text(dtype, kv_dtype)
        T, n, D = odd_size(rng, 4, 12), odd_size(rng, 30, 120), odd_size(rng, 3, 20)
        q, k = offset_scores(rng, _far_offsets(rng, T), n, D, dtype)
        k, v = k.astype(kv_dtype), _normal(rng, n, D).astype(dtype).astype(kv_dtype)
        mask = _mask(rng, T, n, empty_rows=1)
        hidden = rng.choice(n, n // 4, replace=False)
        mask[:, hidden] = False
        mask[:2, rng.choice(np.setdiff1d(np.arange(n), hidden), 2)] = True  # the far rows see keys
        _unseen_hold_garbage(rng, k, v, ~mask.any(axis=0), beyond_float32=mixed)
        misses.append(_expect_attention(ex, q, k, v, mask, {"T": T, "n": n, "D": D, "dtype": name,
                                                            "far_scores": True, "seed": ex.seed}))
        capacity = odd_size(rng, 40, 90)
        kv = _ring(rng, T, capacity, capacity + odd_size(rng, 20, 200), D, capacity // 5)
        kv.q, kv.k = offset_scores(rng, _far_offsets(rng, T), capacity, D, dtype)
        kv.k, kv.v = kv.k.astype(kv_dtype), kv.v.astype(dtype).astype(kv_dtype)
        _unseen_hold_garbage(rng, kv.k, kv.v, ~oracle.visible(kv.q_pos, kv.k_pos).any(axis=0), beyond_float32=mixed)
        kv.label += f", {name}, scores far from 0, unseen slots holding garbage"
        dense = _dense(kv)
        misses += [_expect_split_kv(ex, kv, n, dense=dense) for n in (1, 3, capacity + 2)]
    settle(ex, misses)


# ---- shared_prefix_attention --------------------------------------------------------------------

def _cascade(rng, B, T, L, P, D) -> tuple:
    """shared_prefix_attention's arguments of these sizes, drawn normal."""
    return (_normal(rng, B, T, D), _normal(rng, P, D), _normal(rng, P, D), _normal(rng, B, L, D),
            _normal(rng, B, L, D))


def _expect_shared_prefix(ex, arrays, far=None) -> Miss | None:
    """Compare a cascade of these ``arrays`` (``far``: how far their levels' scores lie apart) with the oracle."""
    q, prefix_k, prefix_v, suffix_k, suffix_v = arrays
    (B, T, D), P, L = q.shape, len(prefix_k), suffix_k.shape[1]
    case = {"B": B, "T": T, "L": L, "P": P, "D": D, "seed": ex.seed} | ({"suffix_scores": far} if far else {})
    got, call = _shared_prefix(ex, q, prefix_k, prefix_v, suffix_k, suffix_v, case)
    want = oracle.shared_prefix(q, prefix_k, prefix_v, suffix_k, suffix_v)
    scaled = [np.einsum("btd,pd->btp", q, prefix_k), np.einsum("btd,bld->btl", q, suffix_k)]
    m = max(float(np.abs(x).max(initial=1.0)) for x in scaled) / np.sqrt(D)  # section 1's m: the scaled scores'
    tol = Tol.of((q, prefix_k, prefix_v, suffix_k, suffix_v), (want, None), magnitude=m)
    flat_got, flat_want = got.reshape(B * T, D), want.reshape(B * T, D)
    if not diagnosis.off_rows(flat_got, None, flat_want, None, tol).any():
        return None
    found = diagnosis.explaining_shared_prefix(got, q, prefix_k, prefix_v, suffix_k, suffix_v, want, tol)
    return _compare((flat_got, None), (flat_want, None), tol, call, case, q.size + P + B * L, found,
                    row_name=lambda r: f"query {r % T} of sequence {r // T}")


def check_shared_prefix_values(ex):
    """Cascade attention (B = 1 .. 5, T = 1 .. L, P = 0, P > L, and suffix scores ~900 above or below the
    prefix's, as section 1's scores allow) equals each sequence's own full attention."""
    rng = ex.rng
    D = odd_size(rng, 3, 20)
    L = odd_size(rng, 5, 14)
    shapes = [(1, 1, L, 0), (5, odd_size(rng, 2, L), L, odd_size(rng, 3, 40)), (3, L, L, odd_size(rng, 3, 40)),
              (4, 3, L, 0), (2, odd_size(rng, 2, L), L, L + odd_size(rng, 5, 30)), (1, L, L, 2 * L + 1),
              (2, 3, 6, odd_size(rng, 33_000, 40_000))]
    misses = [_expect_shared_prefix(ex, _cascade(rng, B, T, L_, P, D)) for B, T, L_, P in shapes]
    for sign in (-1, 1):  # the levels' lse then differ past what exp holds: the merge must stay exact
        misses.append(_expect_shared_prefix(ex, _far_suffix(rng, sign, D), far=f"~{sign * 900} beside ~0"))
    settle(ex, misses)


# ---- the same arrays, rewritten in place between calls ------------------------------------------

def _rewritten_cases(rng):
    """(function, its arguments, new values for their arrays (same shapes and dtypes), the oracle or
    None for the merge's): every function that takes arrays."""
    T, D, n, N = odd_size(rng, 3, 9), odd_size(rng, 3, 12), odd_size(rng, 20, 60), 5

    def attention():
        q, k, v = _normal(rng, T, D), _normal(rng, n, D), _normal(rng, n, D)
        return q, k, v, _mask(rng, T, n, empty_rows=1)

    def parts():
        p = _parts(rng, N, T, n, D, 0)
        return p.o, p.lse

    capacity, B, L, P = odd_size(rng, 30, 70), 3, odd_size(rng, 4, 9), odd_size(rng, 5, 30)
    written = [capacity + odd_size(rng, 10, 200) for _ in range(2)]

    def ring(written):
        kv = _ring(rng, T, capacity, written, D, 5, gap=2)
        return kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos

    def cascade():
        return (_normal(rng, B, 2, D), _normal(rng, P, D), _normal(rng, P, D), _normal(rng, B, L, D),
                _normal(rng, B, L, D))

    splits = int(rng.integers(2, 7))
    return [("attention_with_lse", attention(), attention(), oracle.masked_attention),
            ("merge_states", parts(), parts(), None),
            ("split_kv_attention", (*ring(written[0]), splits), ring(written[1]),
             lambda q, k, v, q_pos, k_pos, _: oracle.positional_attention(q, k, v, q_pos, k_pos)),
            ("shared_prefix_attention", cascade(), cascade(), oracle.shared_prefix)]


def _narrowed(before, after) -> tuple:
    """(before, after) with float arrays in float32 and int arrays in int32: the dtypes an answer converts, whose
    converted copy it may keep (keyed on the array's identity, it is met again after the rewrite). An int
    argument either value of which int32 cannot hold (an INT64_MIN empty mark) stays int64 in both."""
    def fits(x) -> bool:
        return not isinstance(x, np.ndarray) or x.size == 0 or (-(2**31) <= x.min() and x.max() < 2**31)

    def narrow(i, a):
        if not isinstance(a, np.ndarray) or a.dtype.kind not in "fi":
            return a
        if a.dtype.kind == "i" and not (fits(before[i]) and (i >= len(after) or fits(after[i]))):
            return a
        return a.astype(np.float32 if a.dtype.kind == "f" else np.int32)
    return tuple(narrow(i, a) for i, a in enumerate(before)), tuple(narrow(i, a) for i, a in enumerate(after))


def _exact(dense, args):
    """The oracle's answer to ``args`` from their values in float64 (float32 values are float64 values):
    the merge's oracle computes in its inputs' dtype."""
    return _flat(dense(*(a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                         for a in args)))


def _flat(want):
    """An oracle's answer as (o [rows, D], lse [rows] or None): the cascade's [B, T, D] has no lse."""
    return want if isinstance(want, tuple) else (want.reshape(-1, want.shape[-1]), None)


def _answer_of(name, value, args, case, call, slips):
    """The candidate's answer as (o, lse or None), in the shapes asked."""
    if name == "shared_prefix_attention":
        got = received(value, call=call, shape=args[0].shape, kind="f", slips=slips, case=case)
        return got.reshape(-1, got.shape[-1]), None
    T, D = (args[0].shape[1:] if name == "merge_states" else args[0].shape)
    return _expect_part(value, call, T, D, case, slips)


def check_buffers_rewritten_in_place(ex):
    """Each function answers its arguments as they are now: the same arrays, rewritten in place by the
    caller between two calls, give the new values' answer (no memo keyed on identity or part of them);
    every function in float64 and int64, then again in float32 and int32."""
    rng, held, misses = ex.rng, Held(ex), []
    cases = _rewritten_cases(rng)
    for name, before, after, dense in cases + [(n, *_narrowed(b, a), d) for n, b, a, d in cases]:
        fn = getattr(ex.candidate, name)
        dense = dense or oracle.merged
        first, box = held.call(fn, *before)
        case = {"function": name, "shapes": [list(before[i].shape) for i in box.arrays],
                "dtypes": [str(before[i].dtype) for i in box.arrays], "seed": ex.seed}
        held.overwrite(box, box.arrays, [np.asarray(after[i], dtype=before[i].dtype) for i in box.arrays])
        answers = [first, held.again(fn, box)]
        now = tuple(after) + tuple(before[len(after):])
        for step, (args, value) in enumerate(zip((before, now), answers)):
            call = f"{name}({', '.join(_text(a) if isinstance(a, np.ndarray) else repr(a) for a in args)})"
            if step:
                call += (" called again on the same arrays after the caller rewrote every one of them in place "
                         "(new values, same shapes)")
            got = _answer_of(name, value, args, case, call, slips_of(ex))
            want = _exact(dense, args)
            tol = Tol.of(tuple(a for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"), want)
            miss = _compare(got, want, tol, call, case | {"call": "second" if step else "first"},
                            sum(a.size for a in args if isinstance(a, np.ndarray)))
            if miss is not None and step:
                stale = not diagnosis.off_rows(*got, *_exact(dense, before), tol).any()
                miss.message += ((": it is the answer for the values they held before" if stale else "")
                                 + "; a function that holds no state answers its arguments as they are now (a "
                                 "memo keyed on an argument's identity, or on part of the arguments, does not)")
            misses.append(miss)
            if miss is not None:
                break
    settle(ex, misses)


# ---- efficiency: one split at a time -------------------------------------------------------------

# T and num_splits of the case a T x S bool mask fails. T is many times 16 D (D <= 4): a float64 copy of k and v
# (16 D bytes a key, which measure allows: a defensive copy) stays an eighth of a bool mask's T bytes a key
WHOLE_MASK_ROWS, WHOLE_MASK_SPLITS = (480, 560), (112, 144)
WHOLE_MASK_KEYS = (20_000, 23_000)  # S: a T x S bool mask of ~11 MB, twice the bound
WHOLE_MASK_SECONDS = 60.0  # per call: a correct row-by-row loop (about 65,000 row-splits) takes seconds under load


def check_split_kv_memory_per_split(ex):
    """With many splits, a call never holds a T x S score matrix, nor even a T x S mask: the splits are
    attended one by one."""
    rng = ex.rng  # T, D and n drawn too: no constant tells these calls from the value checks' (a red team's did)
    T, S, D, n = odd_size(rng, 40, 56), odd_size(rng, 150_000, 160_000), int(rng.integers(4, 9)), odd_size(rng, 50, 70)
    for kv in (_decode(rng, T, S, D), _ring(rng, T, S, S + 20_011, D, 500)):
        value, peak, _ = measure(ex, ex.candidate, "split_kv_attention", kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos, n)
        settle(ex, [_expect_measured(ex, kv, n, value, kv.case(ex.seed, n))])  # it counts like any other answer
        dense = T * S * 8  # one float64 score matrix over all keys
        if peak is not None and peak >= dense // 2:
            _held_all_keys(ex, kv, n, peak, f"while T x S float64 scores are {dense / 2**20:.1f} MiB and one "
                                            f"split's are {dense / n / 2**20:.1f} MiB")
    _expect_no_whole_mask(ex)


def _expect_no_whole_mask(ex):
    """Many queries (T about 512) of width 1 to 4 over ~21k keys in about 128 splits, each drawn anew (no
    constant tells these calls from others: a red team kept the mask off only where D = 1): one bool mask
    over all T x S pairs is 16 splits' float64 scores, and twenty times the reference's figure. Measured in
    a fresh child (the twin): import's memory still counts, but not a memo earlier checks filled (positions kept by
    identity, say), which the looser cases above may carry. Every call that child gets is measured, each
    on a fresh S, and the middle of three counts (``middle_reading``): the one call an answer can place
    (its first) cannot be the only one that behaves."""
    rng = ex.rng

    def reading():
        T, n = odd_size(rng, *WHOLE_MASK_ROWS), odd_size(rng, *WHOLE_MASK_SPLITS)
        kv = _decode(rng, T, odd_size(rng, *WHOLE_MASK_KEYS), int(rng.integers(1, 5)))
        value, peak, _ = measure(ex, fresh.module, "split_kv_attention", kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos, n)
        settle(ex, [_expect_measured(ex, kv, n, value, kv.case(ex.seed, n))])
        return None if peak is None else (peak / (T * len(kv.k_pos)), (kv, n, peak))  # bytes per T x S pair

    fresh = ex.sandbox.spare()
    try:
        with fresh.patient(WHOLE_MASK_SECONDS):
            middle = middle_reading(0.5, reading)  # the bound: half a T x S bool mask (the reference's is a tenth)
    finally:
        fresh.let_go()
    if middle is not None and middle[0] >= 0.5:
        kv, n, peak = middle[1]
        T, S = len(kv.q_pos), len(kv.k_pos)
        _held_all_keys(ex, kv, n, peak, f"while a bool mask over all T x S pairs is {T * S / 2**20:.1f} MiB "
                                        f"and one split's float64 scores are {T * S * 8 / n / 2**20:.2f} MiB")


def _held_all_keys(ex, kv, n, peak, sizes: str):
    T, S = len(kv.q_pos), len(kv.k_pos)
    ex.diagnose("dense_scores_not_split",
                f"split_kv_attention with T = {T} queries over S = {S:,} keys in {n} splits peaked at "
                f"{peak / 2**20:.1f} MiB, {sizes}: it held something as large as all T x S pairs at once")
    fail(f"split_kv_attention(T = {T}, S = {S:,}, num_splits = {n}) [{kv.label}] allocated up to "
         f"{peak:,} bytes; one split's scores need about {T * S * 8 // n:,}", kv.case(ex.seed, n),
         kind="efficiency")


# ---- numpy warnings ------------------------------------------------------------------------------

def _warned(ex, fn: str, *args, situation: str) -> str | None:
    """Call the candidate's ``fn``; the warnings it reported, as a sentence (None when quiet)."""
    _, _, caught = measure(ex, ex.candidate, fn, *args, memory=False)
    return f"{situation}: \"{caught[0]}\"" + (f" (and {len(caught) - 1} more)" if len(caught) > 1 else "") \
        if caught else None


def _far_from_zero(rng, sign, dtype):
    """(split_kv_attention's arguments, what they are): caches whose scaled scores all lie 800 to 1e4 below 0
    (``sign`` -1) or above it (+1), in n splits of which only split j holds keys the queries see, for every
    j, then every split: a merge that starts from (or meets) an empty part has its exponent taken against
    a far lse wherever the far part stands."""
    T, S, D, n = 3, odd_size(rng, 9, 40), odd_size(rng, 3, 12), int(rng.integers(3, 6))
    offsets = sign * rng.uniform(800, 1e4, T)
    offsets[-1] = sign * (1e4 - rng.uniform(3, 6))  # the range's end: a finite fill of -1e4 weighs like a seen key
    q, k = offset_scores(rng, offsets, S, D, dtype)
    v, q_pos = _normal(rng, S, D).astype(dtype), np.full(T, S + 5)  # every stored key is in the queries' past
    scores = f"every scaled score {'below -800' if sign < 0 else 'above 800'}, {np.dtype(dtype).name}"
    for j, (a, b) in enumerate(oracle.ranges(S, n)):
        k_pos = np.full(S, -1)
        k_pos[a:b] = np.arange(a, b)
        yield (q, k, v, q_pos, k_pos, n), f"split_kv_attention ({scores}) where only split {j} of {n} sees keys"
    yield (q, k, v, q_pos, np.arange(S), n), f"split_kv_attention ({scores}) where each of {n} splits sees keys"


def _far_lse_parts(rng, sign):
    """(merge_states' arguments, what they are): lse all 800 to 1e4 below or above 0, only part j live
    (the others -inf) for every j, then every part live."""
    N, T, D = 5, 4, 3
    o, far = _normal(rng, N, T, D), sign * rng.uniform(800, 1e4, (N, T))
    side = "below -800" if sign < 0 else "above 800"
    for j in range(N):
        lse = np.full((N, T), -np.inf)
        lse[j] = far[j]
        yield (o, lse), f"merge_states with lse {side} in part {j} of {N} only"
    yield (o, far), f"merge_states with every lse {side}"


def check_quiet_numpy(ex):
    """No numpy warning from any function: empty rows and chunks, empty or NaN parts, huge lse, empty splits, P = 0,
    scores or lse all far below or far above 0, in any one split or part or in all, and a cascade whose suffix
    scores lie far above or below its prefix's."""
    rng, heard = ex.rng, []
    T, D = 5, 7
    q, k, v = _normal(rng, T, D), _normal(rng, 30, D), _normal(rng, 30, D)
    for n, mask, what in [(30, _mask(rng, T, 30, 2), "attention_with_lse with rows that see no key"),
                          (0, np.zeros((T, 0), bool), "attention_with_lse over no keys")]:
        heard.append(_warned(ex, "attention_with_lse", q, k[:n], v[:n], mask, situation=what))
    garbage = _parts(rng, 5, T, 40, D, ex.seed, garbage=True)
    for o, lse, what in [(garbage.o, garbage.lse, "merge_states with empty parts holding NaN"),
                         (np.full((3, T, D), np.nan), np.full((3, T), -np.inf), "merge_states of empty parts only")]:
        heard.append(_warned(ex, "merge_states", o, lse, situation=what))
    for magnitude in (1e4, -1e4 / 1.1):
        huge = _scaled_parts(rng, 4, magnitude, ex.seed)
        heard.append(_warned(ex, "merge_states", huge.o, huge.lse,
                             situation=f"merge_states with lse near {magnitude:.0e}"))
    for kv, n in [(_ring(rng, 4, 45, 120, D, 6), 44), (_decode(rng, 1, 23, D), 30)]:
        heard.append(_warned(ex, "split_kv_attention", kv.q, kv.k, kv.v, kv.q_pos, kv.k_pos, n,
                             situation=f"split_kv_attention [{kv.label}] in {n} splits"))
    for sign in (-1, 1):
        calls = [("split_kv_attention", *c) for dtype in (np.float64, np.float32)
                 for c in _far_from_zero(rng, sign, dtype)]
        calls += [("merge_states", *c) for c in _far_lse_parts(rng, sign)]
        heard += [_warned(ex, fn, *args, situation=what) for fn, args, what in calls]
    heard.append(_warned(ex, "shared_prefix_attention", _normal(rng, 2, 3, D), np.zeros((0, D)),
                         np.zeros((0, D)), _normal(rng, 2, 4, D), _normal(rng, 2, 4, D),
                         situation="shared_prefix_attention with P = 0"))
    for sign in (-1, 1):
        heard.append(_warned(ex, "shared_prefix_attention", *_far_suffix(rng, sign, D),
                             situation=f"shared_prefix_attention with the suffix's scores ~{sign * 900} beside "
                                       "the prefix's ~0"))
    heard = [h for h in heard if h]
    if heard:
        fail(f"numpy warned during {heard[0]}" + (f"; also during {len(heard) - 1} more situations" if len(heard) > 1
                                                   else "") + "; the contract promises no warning",
             {"seed": ex.seed}, kind="hygiene")


def _far_suffix(rng, sign, D):
    """Cascade arguments whose suffix scores sit ~900 above (``sign`` 1) or below the prefix's, as section 1
    allows: the two levels' lse then differ past what exp holds (a sigmoid-form merge overflows)."""
    u = _normal(rng, D)
    u /= np.linalg.norm(u)
    q = 30 * np.sqrt(D) * u + _normal(rng, 2, 3, D, scale=0.01)  # [B, T, D], every query along u
    suffix_k = sign * 30 * u + _normal(rng, 2, 4, D, scale=0.01)  # scores ~ sign * 900
    return q, _normal(rng, 5, D), _normal(rng, 5, D), suffix_k, _normal(rng, 2, 4, D)


# ---- validation ----------------------------------------------------------------------------------

def _valid_calls(rng):
    """(function, argument names, axes, a valid call's arrays, pack) for every function that takes arrays.
    Each axis name is one size: v, prefix_v and suffix_v are [.., D] like q (the signatures), though
    the product p @ v itself works at any width."""
    size = dict(zip(["N", "T", "n", "D", "B", "P", "L"], (int(x) for x in rng.choice(np.arange(3, 14), 7,
                                                                                      replace=False))))
    size["Tq"] = 2  # a valid call before the change: T <= L
    f = lambda names: rng.standard_normal([size[x] for x in names])  # noqa: E731
    functions = [  # name, argument names, axes, the call
        ("attention_with_lse", ["q", "k", "v", "mask"], [("T", "D"), ("n", "D"), ("n", "D"), ("T", "n")],
         lambda a: a),
        ("merge_states", ["o", "lse"], [("N", "T", "D"), ("N", "T")], lambda a: a),
        ("split_kv_attention", ["q", "k", "v", "q_positions", "k_positions"],
         [("T", "D"), ("n", "D"), ("n", "D"), ("T",), ("n",)], lambda a: (*a, 2)),
        ("shared_prefix_attention", ["q", "prefix_k", "prefix_v", "suffix_k", "suffix_v"],
         [("B", "Tq", "D"), ("P", "D"), ("P", "D"), ("B", "L", "D"), ("B", "L", "D")], lambda a: a),
    ]
    for name, arg_names, axes, pack in functions:
        arrays = [f(names) for names in axes]
        if name == "attention_with_lse":
            arrays[3] = rng.random(arrays[3].shape) < 0.7
        if name == "split_kv_attention":  # every key visible to every query
            arrays[3], arrays[4] = np.arange(size["n"], size["n"] + size["T"]), np.arange(size["n"])
        yield name, arg_names, axes, arrays, pack


def _broadcast_misfits(calls):
    """(function, arguments, call) for every array argument of every function, in turn given a shape
    that disagrees with another argument's only in a way numpy broadcasts (``checking.misfit_calls``)."""
    for name, arg_names, axes, arrays, pack in calls:
        yield from misfit_calls(name, arg_names, axes, arrays, pack)


def _value_width_misfits(rng, calls):
    """(function, arguments, call): the value arrays of every function narrower, then wider, than q's D
    (a width of 1 is the broadcast misfits'), each alone and, in the cascade, both together (checked
    against each other, not against D, they still agree)."""
    for name, arg_names, _, arrays, pack in calls:
        values = [i for i, a in enumerate(arg_names) if a.endswith("v")]
        D = arrays[0].shape[-1]
        for width in (int(rng.integers(2, D)), int(rng.integers(D + 1, 2 * D + 1))):
            for changed in [[i] for i in values] + ([values] if len(values) > 1 else []):
                args = [rng.standard_normal((*a.shape[:-1], width)) if i in changed else a
                        for i, a in enumerate(arrays)]
                shapes = ", ".join(f"{a} {list(x.shape)}" for a, x in zip(arg_names, args))
                yield name, pack(args), f"{name}({shapes}): values {width} wide, q's D = {D}"


def check_rejects_invalid_arguments(ex):
    """Negative query positions, num_splits < 1 or not an int, S < 0, misfit shapes and T > L raise ValueError;
    so does every array argument of every function in turn with a shared axis of 1, its leading axis dropped
    or a leading 1 added (shapes numpy would broadcast), and values (v, prefix_v, suffix_v) narrower or wider
    than q's D, alone or together."""
    rng, c = ex.rng, ex.candidate
    f = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    cases = [
        (c.split_ranges, (-1, 3), "split_ranges(-1, 3)"),
        (c.split_ranges, (10, 0), "split_ranges(10, 0)"),
        (c.split_ranges, (10, np.int64(-2)), "split_ranges(10, np.int64(-2))"),
        (c.split_ranges, (10, 2.5), "split_ranges(10, 2.5): a float is not a count"),
        (c.split_kv_attention, (f(2, 4), f(6, 4), f(6, 4), [4, 5], np.arange(6), 2.5),
         "split_kv_attention with num_splits = 2.5"),
        (c.split_kv_attention, (f(2, 4), f(6, 4), f(6, 4), [-1, 5], np.arange(6), 2),
         "split_kv_attention with q_positions [-1, 5]"),
        (c.split_kv_attention, (f(2, 4), f(6, 4), f(6, 4), [4, 5], np.arange(6), 0),
         "split_kv_attention with num_splits = 0"),
        (c.split_kv_attention, (f(2, 4), f(6, 4), f(6, 4), [4, 5], np.arange(5), 2),
         "split_kv_attention with 5 k_positions for 6 keys"),
        (c.attention_with_lse, (f(3, 4), f(5, 4), f(5, 4), np.ones((3, 6), bool)),
         "attention_with_lse with mask [3, 6] for n = 5"),
        (c.attention_with_lse, (f(3, 4), f(5, 3), f(5, 4), np.ones((3, 5), bool)),
         "attention_with_lse with k [5, 3], q [3, 4]"),
        (c.merge_states, (f(3, 4, 2), f(3, 1)), "merge_states(o [3, 4, 2], lse [3, 1])"),
        (c.merge_states, (f(0, 4, 2), f(0, 4)), "merge_states with N = 0 parts"),
        (c.shared_prefix_attention, (f(2, 5, 4), f(3, 4), f(3, 4), f(2, 4, 4), f(2, 4, 4)),
         "shared_prefix_attention with T = 5 > L = 4"),
        (c.shared_prefix_attention, (f(2, 2, 4), f(3, 4), f(3, 4), f(3, 4, 4), f(3, 4, 4)),
         "shared_prefix_attention with B = 2 queries but 3 suffixes"),
    ]
    calls = list(_valid_calls(rng))
    cases += [(getattr(c, name), args, call)
              for name, args, call in [*_broadcast_misfits(calls), *_value_width_misfits(rng, calls)]]
    for fn, args, call in cases:
        expect_rejected(ex, fn, *args, call=call, diagnosis="accepts_invalid_arguments",
                        why="an invalid argument turned into a plausible-looking answer", case={"seed": ex.seed})


def integer_edges():
    """split_ranges calls whose S reaches the top of int8, int16 and int32, for the general
    integer-type check."""
    return [("split_ranges", (S, n), {}) for S, n in [(127, 5), (32767, 7), (2**31 - 1, 3)]]
