"""Known-wrong variants of split-KV and cascade attention, and the sentences that name them.

A variant computes what a classic mistake returns on the same input (or, for NaN and overflow,
which rows it breaks). A check names a mistake only when the variant explains every failing
case it met; ``explaining`` returns the ids that explain one case, the check intersects them.
"""
import math
from dataclasses import dataclass

import numpy as np

from grader.checking import tolerance

from . import oracle

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Tol:
    """Section 1's absolute tolerances (``checking.tolerance``): for o, whose size is the values',
    and for lse, whose size is the scores'."""
    o: float
    lse: float

    @classmethod
    def of(cls, inputs, want, magnitude: float | None = None) -> "Tol":
        """For answers ``want`` = (o, lse or None) computed from ``inputs``; m is the largest
        finite |lse| unless ``magnitude`` gives the scores' own."""
        o, lse = (np.asarray(x, np.float64) if x is not None else None for x in want)
        if magnitude is None:
            magnitude = float(np.max(np.abs(lse[np.isfinite(lse)]), initial=1.0)) if lse is not None else 1.0
        scale = float(np.max(np.abs(o[np.isfinite(o)]), initial=1.0))
        return cls(tolerance(inputs, magnitude, scale), tolerance(inputs, magnitude))


def close(got, want, atol: float) -> np.ndarray:
    """Elementwise: equal (infinities included, NaN matching NaN) or within ``atol``."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.isfinite(want) & (np.abs(got - want) <= atol)
    return (got == want) | (np.isnan(got) & np.isnan(want)) | near


def off_rows(got_o, got_lse, want_o, want_lse, tol: Tol) -> np.ndarray:
    """[rows] bool: rows where o or (when both are given) lse differ. o may be [..., D]."""
    bad = ~close(got_o, want_o, tol.o).all(axis=-1)
    if got_lse is not None and want_lse is not None:
        bad |= ~close(got_lse, want_lse, tol.lse)
    return bad


def _is(got, variant, want, tol) -> bool:
    """``got`` is wrong and equals ``variant`` everywhere (lse compared when the variant states it)."""
    (g_o, g_lse), (v_o, v_lse), (w_o, w_lse) = got, variant, want
    return bool(off_rows(g_o, g_lse, w_o, w_lse, tol).any() and not off_rows(g_o, g_lse, v_o, v_lse, tol).any())


def _nan_rows(o) -> np.ndarray:
    return np.isnan(np.asarray(o, np.float64)).any(axis=-1)


def _nan_only_where(got, want, tol, allowed_rows) -> bool:
    """Every wrong row holds NaN and lies among ``allowed_rows`` (bool [rows])."""
    bad = off_rows(*got, *want, tol)
    return bool(bad.any() and (_nan_rows(got[0])[bad]).all() and allowed_rows[bad].all())


def _g(x) -> str:
    return f"{float(x):.4g}"


# ---- merges of parts o [N, T, D], lse [N, T] ---------------------------------------------------

def _safe_top(lse):
    top = lse.max(axis=0)
    return np.where(np.isfinite(top), top, 0.0)


def _weighted(o, weights):
    """sum_i w_i o_i / sum_i w_i with parts of weight 0 skipped (their o may hold anything)."""
    total = weights.sum(axis=0)
    acc = np.where((weights > 0)[..., None], weights[..., None] * np.nan_to_num(o), 0.0).sum(axis=0)
    return acc / np.where(total > 0, total, 1.0)[:, None], total


def merge_averages(o, lse):
    """Ways of ignoring the weights: the mean or sum of all parts (empty ones as they are, or as zeros),
    or the mean of the non-empty ones."""
    seen = np.isfinite(lse)  # [N, T]
    kept = np.where(seen[..., None], o, 0.0)
    count = np.maximum(seen.sum(axis=0), 1)[:, None]
    return [(o.mean(axis=0), None), (o.sum(axis=0), None), (kept.mean(axis=0), None), (kept.sum(axis=0), None),
            (kept.sum(axis=0) / count, None)]


def merge_base_2(o, lse):
    """The parts' lse read as base-2 logs: weights 2^(lse_i - lse), lse = log2(sum 2^lse_i)."""
    top = _safe_top(lse)
    out, total = _weighted(o, np.exp2(lse - top))
    return out, np.where(total > 0, top + np.log2(np.where(total > 0, total, 1.0)), -np.inf)


def merge_raw_exp(o, lse):
    """exp(lse_i) without subtracting the largest: overflows to inf or underflows to 0 at |lse| ~ 1e3."""
    with np.errstate(all="ignore"):
        w = np.exp(lse)
        total = w.sum(axis=0)
        return (w[..., None] * o).sum(axis=0) / total[:, None], np.log(total)


def merge_stale_max(o, lse):
    """A running merge in part order that weighs each new part against the running max but never
    rescales what it has already accumulated when that max grows."""
    T, D = o.shape[1:]
    m, l, acc = np.full(T, -np.inf), np.zeros(T), np.zeros((T, D))
    for o_i, lse_i in zip(o, lse):
        m = np.maximum(m, lse_i)
        seen = np.isfinite(lse_i)
        w = np.exp(np.where(seen, lse_i - np.where(np.isfinite(m), m, 0.0), -np.inf))
        acc += np.where(seen[:, None], w[:, None] * np.nan_to_num(o_i), 0.0)
        l += w
    return acc / np.where(l > 0, l, 1.0)[:, None], None


def _lost(got) -> np.ndarray:
    """[rows]: what exp(lse) breaking leaves: an o row holding inf or NaN (overflow), or all zeros,
    or an lse that is not finite (underflow); a row merely off by rounding is none of these."""
    g_o = np.asarray(got[0], np.float64)
    lost = ~np.isfinite(g_o).all(axis=-1) | (g_o == 0).all(axis=-1)
    return lost | (~np.isfinite(np.asarray(got[1], np.float64)) if got[1] is not None else False)


def _live(lse):
    """lse with the empty parts' -inf as NaN (left out of a range)."""
    return np.where(np.isfinite(lse), lse, np.nan)


def _weights_differ(lse) -> np.ndarray:
    """[rows]: rows with two live parts of different lse. Elsewhere a plain mean of the live parts is the
    weighted merge, so a wrong row there (an empty part's o passed through or counted, N = 1 included)
    is no evidence of averaging."""
    live = np.isfinite(lse)
    return np.where(live, lse, -np.inf).max(axis=0) > np.where(live, lse, np.inf).min(axis=0)


def explaining_merge(got, o, lse, want, tol, label="part"):
    """[(id, sentence)] of the merge mistakes that explain ``got`` for parts (o, lse); ``label``
    names a part in sentences ("part" or "split")."""
    N = len(lse)
    bad = off_rows(*got, *want, tol)
    if not bad.any():
        return []
    row = int(np.flatnonzero(bad)[0])
    found = []
    weighed = bad & _weights_differ(lse)  # only there can ignoring the weights show
    if weighed.any() and any(_is(got, v, want, tol) for v in merge_averages(o, lse)):
        at = int(np.flatnonzero(weighed)[0])
        found.append(("averaged_outputs",
                      f"query {at}'s output is the plain mean (or sum) of the {N} {label}s' outputs, though their "
                      f"lse run from {_g(np.nanmin(_live(lse)[:, at]))} to {_g(np.nanmax(_live(lse)[:, at]))}: "
                      f"each {label} must weigh by how much of the softmax its keys hold"))
    empty_any = ~np.isfinite(lse).all(axis=0)
    if _nan_only_where(got, want, tol, empty_any):
        nan_row = int(np.flatnonzero(bad & _nan_rows(got[0]))[0])
        empty = int(np.flatnonzero(~np.isfinite(lse[:, nan_row]))[0])
        found.append(("nan_on_empty_split",
                      f"{label} {empty} of {N} held no visible key for query {nan_row}"
                      f"{' (lse = -inf)' if label == 'part' else ''} and turned "
                      "the merge into NaN; an empty part must contribute nothing"))
    raw = merge_raw_exp(o, lse)
    beyond_exp = np.where(np.isfinite(lse), np.abs(lse), 0.0).max(axis=0) > 700  # where exp(lse) breaks
    seen = np.isfinite(lse).any(axis=0)  # rows every part missed are nan_on_empty_split's domain
    if (bad[seen].any() and np.array_equal(bad[seen], off_rows(*raw, *want, tol)[seen]) and beyond_exp[bad].all()
            and _lost(got)[bad].all()):  # wrong where exp(lse) breaks, and as it breaks
        found.append(("merge_overflow",
                      f"query {row}, whose {label}s have lse up to {_g(np.max(lse[:, row]))}, is broken exactly "
                      "where exp(lse) without subtracting the largest overflows to inf or underflows to 0"))
    if _is(got, merge_base_2(o, lse), want, tol):
        found.append(("lse_base_2",
                      f"query {row}'s merge weighs the {N} {label}s by 2^lse instead of e^lse: the lse was read "
                      "as a base-2 logarithm, while attention's log-sum-exp is natural"))
    if _is(got, merge_stale_max(o, lse), want, tol):
        found.append(("merge_without_rescale",
                      f"query {row}'s output equals a running merge of the {N} {label}s that never rescales "
                      "what it has accumulated when a later part raises the maximum"))
    return found


# ---- attention_with_lse ------------------------------------------------------------------------

def explaining_attention(got, q, k, v, mask, want, tol, label="attention_with_lse"):
    """[(id, sentence)] of the mistakes that explain ``got`` = (o, lse) of one attention call."""
    o, lse = want
    empty = ~np.asarray(mask).any(axis=1)
    bad = off_rows(*got, *want, tol)
    if not bad.any():
        return []
    row = int(np.flatnonzero(bad)[0])
    found = []
    if _is(got, oracle.masked_attention(_unscaled(q), k, v, mask), want, tol):
        found.append(_missing_scale(q.shape[1]))
    if _is(got, (o, lse / LN2), want, tol):
        found.append(("lse_base_2",
                      f"{label}: query {row}'s lse is {_g(got[1][row])}, expected {_g(lse[row])}: that is "
                      "log2 of the sum of exponentials; the contract's lse is the natural log"))
    if empty.any() and _is(got, (o, np.where(empty, np.inf, lse)), want, tol):
        found.append(("lse_plus_inf_for_empty",
                      f"{label}: query {int(np.flatnonzero(empty)[0])} sees no key and got lse = +inf "
                      "(FlashAttention-2's marker); here an empty row's lse is -inf, so merges ignore it"))
    if _nan_only_where(got, want, tol, empty):
        nan_row = int(np.flatnonzero(bad & _nan_rows(got[0]))[0])
        found.append(("nan_on_empty_split",
                      f"{label}: query {nan_row} sees no key and its o came back NaN (0 / 0); merged with "
                      "other parts it turns the whole row into NaN"))
    return found


def _unscaled(q):
    """q multiplied by sqrt(D): attention with it is attention on q k^T without the 1/sqrt(D) scale."""
    return np.asarray(q, np.float64) * math.sqrt(np.shape(q)[-1])


def _missing_scale(D) -> tuple:
    return ("missing_scale", f"the answer equals attention on q k^T without the 1/sqrt(D) = "
                             f"{1 / math.sqrt(D):.4g} scale (D = {D})")


# ---- split_ranges ---------------------------------------------------------------------------

def floor_ranges(S, n):
    size = S // n
    return [(i * size, (i + 1) * size) for i in range(n)]


def remainder_last_ranges(S, n):
    size = S // n
    return [(i * size, (i + 1) * size if i < n - 1 else S) for i in range(n)]


def ceil_ranges(S, n):
    """FlashAttention's split sizes: ceil(S / n) keys each, the last split the remainder (or empty)."""
    size = -(-S // n)
    return [(min(i * size, S), min((i + 1) * size, S)) for i in range(n)]


def explaining_ranges(got, S, n):
    """The named mistakes of a cover that is not one (keys lost)."""
    if got == floor_ranges(S, n):
        return [("uneven_split_drops_keys",
                 f"split_ranges({S}, {n}) gave {n} ranges of {S // n} keys ending at {n * (S // n)}: the last "
                 f"{S - n * (S // n)} keys belong to no split")]
    return []


def longer_last_ranges(S, n):
    """The oracle's sizes (within one, as asked) in reverse order: the longer ranges at the end."""
    stops = np.cumsum([b - a for a, b in oracle.ranges(S, n)][::-1]).tolist()
    return list(zip([0] + stops[:-1], stops))


def naming_convention(got, S, n):
    """[(id, sentence)]: every convention a valid cover of other sizes follows (section 1 caps it at hire);
    a small case can fit two ([0, 0, 1] is both the remainder in the last and the longer last), and the
    check names the one that fits every case."""
    found = []
    if got == ceil_ranges(S, n):
        found.append(("ceil_split_sizes", f"split_ranges({S}, {n}) follows FlashAttention's convention, "
                                          f"ceil(S / n) = {-(-S // n)} keys per split with the remainder in the last"))
    if got == remainder_last_ranges(S, n):
        found.append(("remainder_in_last_split", f"split_ranges({S}, {n}) gives every range S // n = {S // n} keys "
                                                 f"and the last one the {S % n} left over as well"))
    if got == longer_last_ranges(S, n):
        longer = "the longer range" if S % n == 1 else f"the {S % n} longer ranges"
        found.append(("other_split_sizes", f"split_ranges({S}, {n}) keeps sizes within one but puts {longer} "
                                           "last rather than first"))
    return found or [("other_split_sizes", "its sizes follow a convention of its own")]


# ---- split_kv_attention ------------------------------------------------------------------------

def explaining_split_kv(got, q, k, v, q_pos, k_pos, n, want, tol):
    """[(id, sentence)]; the parts are the oracle's own answers on the ranges the contract fixes."""
    spans = oracle.ranges(len(k), n)
    visible = oracle.visible(q_pos, k_pos)
    parts = [oracle.masked_attention(q, k[a:b], v[a:b], visible[:, a:b]) for a, b in spans]
    o = np.stack([p[0] for p in parts])
    lse = np.stack([p[1] for p in parts])
    found = [(i, s.replace("part", "split")) for i, s in explaining_merge(got, o, lse, want, tol, label="split")]
    S = len(k)
    if S % n:
        kept = np.asarray(k_pos).copy()
        kept[n * (S // n):] = -1
        if _is(got, oracle.positional_attention(q, k, v, q_pos, kept), want, tol):
            lost = (f"the {S % n} keys past the last full split were lost" if S >= n
                    else "every range was empty, so every key was lost")
            found.append(("uneven_split_drops_keys",
                          f"with S = {S} keys in {n} splits, your answer equals attention without keys "
                          f"{n * (S // n)} .. {S - 1}: {lost}"))
    if (np.asarray(k_pos) < 0).any():
        below = oracle.masked_attention(q, k, v, np.asarray(k_pos)[None, :] <= np.asarray(q_pos)[:, None])
        if _is(got, below, want, tol):
            found.append(("empty_slots_visible",
                          f"your answer equals attention that also reads the {int((np.asarray(k_pos) < 0).sum())} "
                          "empty slots (a negative position is below every query's position): a key needs "
                          "k_pos >= 0 too"))
    if _is(got, oracle.positional_attention(_unscaled(q), k, v, q_pos, k_pos), want, tol):
        found.append(_missing_scale(q.shape[1]))
    if _is(got, (want[0], want[1] / LN2), want, tol) and not any(i == "lse_base_2" for i, _ in found):
        row = int(np.flatnonzero(np.isfinite(want[1]))[0])  # _is found a wrong lse, so one is finite
        found.append(("lse_base_2", f"the outputs are right but every lse is log2 of the sum of exponentials "
                                    f"(query {row}: {_g(got[1][row])} against {_g(want[1][row])})"))
    return found


# ---- shared_prefix_attention ---------------------------------------------------------------------

def prefix_masked(q, prefix_k, prefix_v, suffix_k, suffix_v, sees_prefix):
    """Cascade attention where query i of a sequence sees prefix key j only when sees_prefix(i, j, T, L)."""
    B, T, _ = q.shape
    P, L = len(prefix_k), suffix_k.shape[1]
    i, j = np.arange(T)[:, None], np.arange(P)[None, :]
    suffix = np.arange(L)[None, :] <= np.arange(L - T, L)[:, None]
    mask = np.concatenate([np.broadcast_to(sees_prefix(i, j, T, L), (T, P)), suffix], axis=1)
    return np.stack([oracle.masked_attention(q[b], np.concatenate([prefix_k, suffix_k[b]]),
                                             np.concatenate([prefix_v, suffix_v[b]]), mask)[0] for b in range(B)])


def suffix_top_left(q, prefix_k, prefix_v, suffix_k, suffix_v):
    """Cascade attention whose suffix mask is tril(ones(T, L)): query i sees its suffix's keys 0 .. i."""
    B, T, _ = q.shape
    P, L = len(prefix_k), suffix_k.shape[1]
    mask = np.concatenate([np.ones((T, P), bool), np.arange(L)[None, :] <= np.arange(T)[:, None]], axis=1)
    return np.stack([oracle.masked_attention(q[b], np.concatenate([prefix_k, suffix_k[b]]),
                                             np.concatenate([prefix_v, suffix_v[b]]), mask)[0] for b in range(B)])


PREFIX_RULES = {  # how a causal mask gets applied to the prefix by mistake
    "prefix keys hidden past the query's position within its suffix": lambda i, j, T, L: j <= L - T + i,
    "prefix keys hidden past the query's index": lambda i, j, T, L: j <= i,
}


def explaining_shared_prefix(got, q, prefix_k, prefix_v, suffix_k, suffix_v, want, tol):
    B, T, D = q.shape
    P, L = len(prefix_k), suffix_k.shape[1]
    flat = lambda x: x.reshape(B * T, D)  # noqa: E731
    g, w = (flat(got), None), (flat(want), None)
    bad = off_rows(*g, *w, tol)
    if not bad.any():
        return []
    b, i = divmod(int(np.flatnonzero(bad)[0]), T)
    found = []
    for what, rule in PREFIX_RULES.items():
        if _is(g, (flat(prefix_masked(q, prefix_k, prefix_v, suffix_k, suffix_v, rule)), None), w, tol):
            found.append(("prefix_masked_causally",
                          f"with P = {P} prefix and L = {L} own tokens, query {i} of sequence {b} got the answer of "
                          f"a causal mask laid over the prefix ({what}); every query sees the whole prefix"))
    if T < L and _is(g, (flat(suffix_top_left(q, prefix_k, prefix_v, suffix_k, suffix_v)), None), w, tol):
        found.append(("suffix_top_left",
                      f"with T = {T} queries over L = {L} own tokens, query {i} of sequence {b} saw only its "
                      f"suffix tokens 0 .. {i}: the causal mask was aligned top-left, as if the queries "
                      "were the suffix's first tokens rather than its last"))
    if _is(g, (flat(oracle.shared_prefix(_unscaled(q), prefix_k, prefix_v, suffix_k, suffix_v)), None), w, tol):
        found.append(_missing_scale(D))
    pre = oracle.masked_attention(flat(q), prefix_k, prefix_v, np.ones((B * T, P), bool))
    causal = np.arange(L)[None, :] <= np.arange(L - T, L)[:, None]
    own = [oracle.masked_attention(q[s], suffix_k[s], suffix_v[s], causal) for s in range(B)]
    o = np.stack([pre[0], np.concatenate([x[0] for x in own])])
    lse = np.stack([pre[1], np.concatenate([x[1] for x in own])])
    found += [(d, s) for d, s in explaining_merge(g, o, lse, w, tol, label="part")
              if d in ("averaged_outputs", "nan_on_empty_split", "lse_base_2", "merge_without_rescale")]
    return found
