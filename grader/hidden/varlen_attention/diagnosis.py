"""Known-wrong varlen masks and left-padding rules, and the sentences that name them.

Each mistake is a ``checking.Variant`` over a :class:`Case`: its wrong mask (or positions) for
the case's inputs, turned into what the check compares (an attention output, for attention
checks). The checks name a mistake through ``checking.explain``: only when it fits every failing
case of a check (or it and one other do); ``same`` is this exercise's comparator.
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from grader.checking import Explanation, Variant, explain

from . import oracle


@dataclass
class Case:
    """One failing input: ``inputs`` ((cu_q, cu_k), or (attention_mask, T or None)), the right mask
    or positions the sentences compare with, ``compute`` turning a variant's mask into what the
    check compares (None: the mask itself) and the tolerance of that comparison."""
    inputs: tuple
    want: np.ndarray
    compute: Callable | None = None
    atol: float = 0.0

    def compared(self, answer):
        return answer if self.compute is None else self.compute(answer)


def _variant(diagnosis_id: str, answer: Callable, say: Callable) -> Variant:
    """A checking.Variant from a wrong ``answer(inputs)`` and ``say(inputs, right, wrong)``."""
    return Variant(diagnosis_id, lambda case: case.compared(answer(case.inputs)),
                   lambda case: say(case.inputs, case.want, answer(case.inputs)))


# -- packed batches: inputs are (cu_q, cu_k) as int64 arrays ---------------------------------


def _counts(cu_q, cu_k):
    return np.diff(cu_q), np.diff(cu_k)


def _first_row_lookup(cu):
    """Each row's sequence when a row equal to a start is matched to the FIRST sequence that
    starts there (wrong after a sequence with no rows)."""
    rows = np.arange(cu[-1])
    first = np.searchsorted(cu, rows, side="left")
    return np.where(cu[first] == rows, first, first - 1)


def _right_lookup(cu):
    return np.searchsorted(cu, np.arange(cu[-1]), side="right") - 1


def _per_sequence(cu_q, cu_k, offsets, lookup=_right_lookup):
    """Block-diagonal causal mask with ``offsets[b]`` as sequence b's first query position."""
    seq_q, seq_k = lookup(cu_q), lookup(cu_k)
    q_pos = np.arange(cu_q[-1]) - cu_q[seq_q] + np.asarray(offsets)[seq_q]
    k_pos = np.arange(cu_k[-1]) - cu_k[seq_k]
    return (seq_q[:, None] == seq_k[None, :]) & (k_pos[None, :] <= q_pos[:, None])


def _sequence_of(cu, row):
    return int(np.searchsorted(cu, row, side="right") - 1)


def _keys(n) -> str:
    return f"{int(n)} key" + ("" if n == 1 else "s")


def _first_wrong_row(want, got):
    return int(np.flatnonzero((want != got).any(axis=1))[0])


def _global_local(cu_q, cu_k):
    return _per_sequence(cu_q, cu_k, np.full(len(cu_q) - 1, cu_k[-1] - cu_q[-1]))


def _global_index(cu_q, cu_k):
    rows, cols = np.arange(cu_q[-1]), np.arange(cu_k[-1])
    same = _right_lookup(cu_q)[:, None] == _right_lookup(cu_k)[None, :]
    return same & (cols[None, :] <= rows[:, None] + (cu_k[-1] - cu_q[-1]))


def _first_offset(cu_q, cu_k):
    n_q, n_k = _counts(cu_q, cu_k)
    return _per_sequence(cu_q, cu_k, np.full(len(n_q), n_k[0] - n_q[0]))


def _packed_causal(cu_q, cu_k):
    rows, cols = np.arange(cu_q[-1]), np.arange(cu_k[-1])
    return cols[None, :] <= rows[:, None] + (cu_k[-1] - cu_q[-1])


def _earlier_visible(cu_q, cu_k):
    seq_q, seq_k = _right_lookup(cu_q), _right_lookup(cu_k)
    return oracle.varlen_mask(cu_q, cu_k) | (seq_k[None, :] < seq_q[:, None])


def _empty_lookup(cu_q, cu_k):
    n_q, n_k = _counts(cu_q, cu_k)
    return _per_sequence(cu_q, cu_k, n_k - n_q, lookup=_first_row_lookup)


def _say_offset(how):
    def say(inputs, want, got):
        cu_q, cu_k = inputs
        n_q, n_k = _counts(cu_q, cu_k)
        r = _first_wrong_row(want, got)
        b = _sequence_of(cu_q, r)
        i = r - int(cu_q[b])
        return (f"{how}: sequence {b} (n_q = {n_q[b]}, n_k = {n_k[b]}) has its query {i} (row {r}) see "
                f"{_keys(got[r].sum())} of its own, not {int(want[r].sum())}; its queries are its own newest "
                f"{n_q[b]}, whatever the other sequences hold (batch totals {cu_q[-1]} queries, {cu_k[-1]} keys)")
    return say


def _say_cross(inputs, want, got):
    cu_q, cu_k = inputs
    r = int(np.flatnonzero((got & ~want).any(axis=1))[0]) if (got & ~want).any() else _first_wrong_row(want, got)
    b = _sequence_of(cu_q, r)
    seen = np.flatnonzero(got[r] & ~want[r])
    others = sorted({_sequence_of(cu_k, c) for c in seen} - {b})
    if not others:
        return _say_offset("keys outside the query's own sequence")(inputs, want, got)
    owners = ", ".join(str(o) for o in others)
    counts = ", ".join(f"{_keys(sum(_sequence_of(cu_k, c) == o for c in seen))} of sequence {o}" for o in others)
    requests = f"sequences {owners} are other requests" if len(others) > 1 else f"sequence {owners} is another request"
    return (f"queries see keys of other sequences: sequence {b}'s query {r - int(cu_q[b])} (row {r}) saw "
            f"{counts}; a packed batch must attend within each sequence only ({requests})")


def _rows(columns) -> str:
    columns = np.asarray(columns)
    if columns.size == 0:
        return "no key"
    return f"key row {columns[0]}" if columns.size == 1 else f"key rows {columns[0]}..{columns[-1]}"


def _say_empty_lookup(inputs, want, got):
    cu_q, cu_k = inputs
    r = _first_wrong_row(want, got)
    b = _sequence_of(cu_q, r)
    a = int(_first_row_lookup(cu_q)[r])
    return (f"queries see keys of other sequences: sequence {b}'s first query (row {r}) was taken for one of "
            f"sequence {a}, which has no queries (n_q = 0) and starts at the same row, so it saw "
            f"{_rows(np.flatnonzero(got[r]))}, not its own {_rows(np.flatnonzero(want[r]))}; a row belongs to "
            "the last sequence starting at or before it")


def _say_packed(inputs, want, got):
    """Sequence boundaries ignored; where one batch-wide offset is also wrong, that is said too."""
    sentence = _say_cross(inputs, want, got)
    if not np.array_equal(_global_index(*inputs), oracle.varlen_mask(*inputs)):
        within = _say_offset("within its own sequence too, one offset (total_k - total_q) for the whole batch")
        sentence += "; " + within(inputs, want, _global_index(*inputs))
    return sentence


def _top_left(cu_q, cu_k):
    return _per_sequence(cu_q, cu_k, np.zeros(len(cu_q) - 1, np.int64))


def _say_top_left(inputs, want, got):
    cu_q, cu_k = inputs
    n_q, n_k = _counts(cu_q, cu_k)
    r = _first_wrong_row(want, got)
    b = _sequence_of(cu_q, r)
    i = r - int(cu_q[b])
    return (f"each sequence's queries start at its first key (as xformers' BlockDiagonalCausalMask or PyTorch's "
            f"is_causal align them): sequence {b} (n_q = {n_q[b]}, n_k = {n_k[b]}) has its query {i} (row {r}) see "
            f"{_keys(got[r].sum())}, not {int(want[r].sum())}; its queries are its last {n_q[b]} positions, "
            f"{n_k[b] - n_q[b]} .. {n_k[b] - 1}")


MASK_VARIANTS = [
    _variant("global_offset", lambda i: _global_local(*i),
             _say_offset("one offset (total_k - total_q) for the whole batch instead of per sequence")),
    _variant("global_offset", lambda i: _global_index(*i),
             _say_offset("one bottom-right offset over the packed rows (total_k - total_q) instead of per sequence")),
    _variant("global_offset", lambda i: _first_offset(*i),
             _say_offset("the first sequence's offset used for every sequence")),
    _variant("cross_sequence_attention", lambda i: _packed_causal(*i), _say_packed),
    _variant("cross_sequence_attention", lambda i: _earlier_visible(*i), _say_cross),
    _variant("cross_sequence_attention", lambda i: _empty_lookup(*i), _say_empty_lookup),
    _variant("top_left_alignment", lambda i: _top_left(*i), _say_top_left),
]


# -- left padding: inputs are (attention_mask as bool [B, L], T or None) ---------------------


def _column_positions(inputs):
    mask = inputs[0]
    return np.where(mask, np.arange(mask.shape[1]), -1)


def _say_columns(inputs, want, got):
    b = int(np.flatnonzero((want != got).any(axis=1))[0])
    j = int(np.flatnonzero(want[b] != got[b])[0])
    pad = int((~inputs[0][b]).sum())
    return (f"positions counted through the left padding: row {b} has {pad} padding columns, and its token "
            f"in column {j} got position {int(got[b, j])}, not {int(want[b, j])}; a row's first real token "
            "is at position 0, as if the row had never been padded")


def _padding_visible(inputs):
    mask, T = inputs
    B, S = mask.shape
    causal = np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None]
    return np.broadcast_to(causal, (B, T, S))


def _query_columns(inputs):
    mask, T = inputs
    S = mask.shape[1]
    positions = oracle.left_padded_positions(mask)
    return mask[:, None, :] & (positions[:, None, :] <= (S - T + np.arange(T))[None, :, None])


def _say_padding_visible(inputs, want, got):
    mask, T = inputs
    b = int(np.flatnonzero((got & ~want).any(axis=(1, 2)))[0])
    pad = int((~mask[b]).sum())
    return (f"queries attend padding slots: row {b} has {pad} padding columns and its newest token sees all "
            f"{int(got[b, -1].sum())} columns, not its {int(want[b, -1].sum())} real tokens")


def _say_query_columns(inputs, want, got):
    mask, T = inputs
    S = mask.shape[1]
    b = int(np.flatnonzero((want != got).any(axis=(1, 2)))[0])
    i = int(np.flatnonzero((want[b] != got[b]).any(axis=1))[0])
    pad = int((~mask[b]).sum())
    return (f"positions counted through the left padding: row {b} ({pad} padding columns) placed new token {i} "
            f"at its column {S - T + i} while its keys are numbered from 0, so it sees {int(got[b, i].sum())} "
            f"keys, not {int(want[b, i].sum())}, some of them later tokens")


POSITION_VARIANTS = [
    _variant("positions_count_padding", _column_positions, _say_columns),
    _variant("positions_count_padding", lambda i: np.broadcast_to(np.arange(i[0].shape[1]), i[0].shape), _say_columns),
]

DECODE_MASK_VARIANTS = [
    _variant("padding_visible", _padding_visible, _say_padding_visible),
    _variant("positions_count_padding", _query_columns, _say_query_columns),
]


# -- explaining failures ---------------------------------------------------------------------


def _same(got, wrong, atol=0.0):
    if got.shape != wrong.shape:
        return False
    if got.dtype.kind == "f" or wrong.dtype.kind == "f":
        # a row that sees nothing under the variant (NaN) matches zeros or NaN
        empty = np.isnan(wrong).all(axis=-1, keepdims=True)
        close = np.isclose(got, np.nan_to_num(wrong), rtol=0, atol=atol)
        return bool((close | (empty & np.isnan(got))).all())
    return np.array_equal(got, wrong)


def _fits(got, wrong, case: Case) -> bool:
    return _same(got, wrong, case.atol)


def explain_failures(variants, failures) -> Explanation:
    """Which mistakes explain every failing (Case, submitted answer): ``checking.explain`` with
    this exercise's comparator; a variant equal to the right answer on a case fits nothing there."""
    return explain(variants, failures, right=lambda case: case.compared(case.want), same=_fits)
