"""The hidden checks' toolkit: one sampler, one diagnosis rule, pictures where the mistake is."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from grader.checking import (CheckFailure, ExerciseRun, Miss, Variant, describe, expect_rejected, explain, grid_picture,
                             measure, middle_reading, odd_size, settle)
from grader.sandbox import CallStats, CandidateCrashed, CandidateRaised, CandidateTimeout
from grader.sandbox.wire import HELD_BYTES

ROOT = Path(__file__).resolve().parents[1]


def test_odd_size_stays_in_its_half_open_range_and_avoids_powers_of_two():
    rng = np.random.default_rng(0)
    sizes = [odd_size(rng, 3, 40) for _ in range(300)]
    assert min(sizes) >= 3 and max(sizes) <= 39
    assert not any(n & (n - 1) == 0 for n in sizes)
    assert odd_size(rng, 4, 5) == 4  # a range holding only a power of two gives it


def _variants():
    return [Variant("doubled", lambda c: 2 * c, lambda c: f"doubled {c}"),
            Variant("negated", lambda c: -c, lambda c: f"negated {c}")]


def test_a_mistake_is_named_only_when_it_explains_every_failing_case():
    assert explain(_variants(), [(3, 6), (5, 10)]).named == [("doubled", "doubled 3")]
    one_of_two = explain(_variants(), [(3, 6), (5, 11)])
    assert one_of_two.named == [] and one_of_two.hint == "consistent with doubled in this case"
    assert explain(_variants(), [(3, 7)]).named == [] and explain(_variants(), [(3, 7)]).hint == ""


def test_two_mistakes_that_share_the_failing_cases_are_both_named():
    found = explain(_variants(), [(3, 6), (5, -5)])
    assert sorted(i for i, _ in found.named) == ["doubled", "negated"]


def test_mistakes_that_each_explain_every_case_are_all_named():
    """attention-gym's causal block mask is top-left and tile-index aligned at once: say both."""
    same = [Variant("a", lambda c: c + 1, lambda c: f"a at {c}"), Variant("b", lambda c: c + 1, lambda c: f"b at {c}")]
    assert explain(same, [(1, 2), (4, 5)]).named == [("a", "a at 1"), ("b", "b at 1")]


def test_a_mistake_that_agrees_with_the_right_answer_is_not_named():
    assert explain(_variants(), [(0, 0)], right=lambda c: c).named == []  # 0 doubled is still 0


def test_a_mistake_that_would_have_failed_a_passing_case_is_not_named():
    """Adding two and doubling both give 4 on 2; the answer got 0 right, which adding two would not."""
    both = [Variant("plus_two", lambda c: c + 2, lambda c: f"plus two {c}"),
            Variant("doubled", lambda c: 2 * c, lambda c: f"doubled {c}")]
    assert [i for i, _ in explain(both, [(2, 4)], right=lambda c: c).named] == ["plus_two", "doubled"]
    assert explain(both, [(2, 4)], right=lambda c: c, passes=[0]).named == [("doubled", "doubled 2")]


def test_settle_names_by_the_same_rule_and_fails_with_the_smallest_miss():
    class Ex:
        named = []

        def diagnose(self, i, sentence):
            self.named.append(i)
    misses = [Miss(9, "big", {"n": 9}, found=[("a", "a fits 9")]), None,
              Miss(2, "small", {"n": 2}, found=[("a", "a fits 2"), ("b", "b fits 2")])]
    with pytest.raises(CheckFailure) as failed:
        settle(Ex(), misses)
    assert failed.value.message == "small; a fits 2" and failed.value.case == {"n": 2} and Ex.named == ["a"]


def test_a_decode_mask_picture_shows_the_bottom_right_corner_where_it_differs():
    T, S = 4, 4096
    want = np.arange(S)[None, :] <= np.arange(S - T, S)[:, None]
    top_left = np.tril(np.ones((T, S), bool))
    picture = grid_picture(want, top_left, "mask", keep_corner=True)
    assert picture["origin"] == [0, S - 48] and len(picture["expected"][0]) == 48
    assert picture["expected"] != picture["submitted"]
    assert grid_picture(want, top_left, "mask")["origin"] == [0, 0]  # without it: round the first cell


def test_describe_names_what_came_back():
    assert describe(np.zeros((2, 3))) == "a float64 array of shape (2, 3)"
    assert describe(np.array([3, 1])) == "int64 array [3, 1]"
    assert describe([1, 2]) == "a list of length 2"


def test_an_unknown_failure_kind_is_refused():
    with pytest.raises(ValueError):
        CheckFailure("x", kind="bad")


FLOOR = 20 << 20  # a kit-only child's footprint
_FLOORED = SimpleNamespace(sandbox=SimpleNamespace(floor_bytes=lambda: FLOOR), collected=True)


class _Target:
    """A stand-in for a remote object: records which of measured / with_stats was used."""

    def __init__(self, fault=None):
        self.used, self.fault = [], fault

    def _reply(self, how, name, *args):
        self.used.append((how, name, args))
        if self.fault:
            raise self.fault
        return sum(args), CallStats(peak_bytes=FLOOR + HELD_BYTES + 4096 if how == "measured" else None,
                                    warnings=["overflow"])

    def measured(self, name, *args, **kwargs):
        return self._reply("measured", name, *args)

    def with_stats(self, name, *args, **kwargs):
        return self._reply("with_stats", name, *args)


def test_measure_takes_memory_from_measured_and_warnings_alone_from_with_stats():
    target = _Target()
    assert measure(_FLOORED, target, "f", 1, 2) == (3, 4096, ["overflow"])  # the figure over the floor
    assert measure(None, target, "f", 1, memory=False) == (1, None, ["overflow"])
    assert [how for how, *_ in target.used] == ["measured", "with_stats"]


def test_running_out_of_memory_is_a_broken_must_not_only_when_memory_is_measured():
    oom = CandidateRaised("f()", {"type": "MemoryError", "mro": ["MemoryError"], "message": "big"})
    with pytest.raises(CheckFailure) as failure:
        measure(None, _Target(oom), "f")
    assert failure.value.kind == "must_not"
    with pytest.raises(CheckFailure) as killed:
        measure(None, _Target(CandidateCrashed("killed")), "f")
    assert killed.value.kind == "must_not"
    with pytest.raises(CandidateRaised):
        measure(None, _Target(oom), "f", memory=False)


def _raising(type_name, *mro, message="bad n"):
    def call(*args, **kwargs):
        raise CandidateRaised("f()", {"type": type_name, "mro": [type_name, *mro], "message": message})
    return call


def _run():
    return ExerciseRun(None, 0, None, None)


def test_a_rejected_call_passes_and_names_nothing():
    ex = _run()
    raised = expect_rejected(ex, _raising("SizeError", "ValueError"), -1, call="f(-1)",
                             diagnosis="accepts_invalid_arguments")
    assert raised.type_name == "SizeError" and ex.diagnoses == {}


def test_a_rejection_with_no_message_is_a_slip_of_the_running_check():
    ex = _run()
    ex.begin_check("rejects_invalid_sizes")
    for message in ("bad n", " "):
        expect_rejected(ex, _raising("ValueError", message=message), -1, call="f(-1)",
                        diagnosis="accepts_invalid_sizes")
    assert ex.slips == ["f(-1) raised ValueError with no message; the contract asks for one that says what is wrong"]
    assert ex.slip_failure().kind == "hygiene" and ex.diagnoses == {}


@pytest.mark.parametrize("fn, said", [(lambda n, window: [n, window], "returned a list of length 2")])
def test_a_call_that_does_not_raise_value_error_names_the_exercises_diagnosis(fn, said):
    ex = _run()
    with pytest.raises(CheckFailure) as failure:
        expect_rejected(ex, fn, -1, window=0, call="f(-1, window=0)", diagnosis="accepts_invalid_sizes",
                        why="a negative size gives a silent answer", case={"n": -1})
    assert failure.value.kind == "hygiene" and failure.value.case == {"n": -1}
    assert failure.value.message.startswith(f"f(-1, window=0) {said}")
    assert ex.diagnoses["accepts_invalid_sizes"].message == (
        "f(-1, window=0) did not raise ValueError: a negative size gives a silent answer")


@pytest.mark.parametrize("fault", [CandidateCrashed("killed"), CandidateTimeout("too slow")])
def test_a_crash_or_a_timeout_is_not_an_accepted_argument(fault):
    def call(*args):
        raise fault
    ex = _run()
    with pytest.raises(type(fault)):
        expect_rejected(ex, call, -1, call="f(-1)", diagnosis="accepts_invalid_arguments")
    assert ex.diagnoses == {}


def _varlen_that_allocates(folder, *, every_call: bool):
    """The varlen reference, made to touch 64 MiB on the first (or every) call with a batch of over 40
    sequences: only no_batch_sized_memory's batches are that large."""
    folder.mkdir()
    source = (ROOT / "solutions" / "varlen_attention.py").read_text()
    (folder / "varlen_attention.py").write_text(source + f'''

_right, _calls = varlen_attention, []


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k):
    if len(cu_seqlens_q) > 41:
        _calls.append(1)
        if {every_call} or len(_calls) == 1:
            np.ones(64 << 20, dtype=np.uint8)  # touched, then freed: a peak of 64 MiB
    return _right(q, k, v, cu_seqlens_q, cu_seqlens_k)
''')
    return folder


@pytest.mark.slow
def test_a_memory_must_not_fails_on_most_readings_and_never_on_one(tmp_path):
    """middle_reading: a peak over the bound on one call only (as a stray charge would be) passes; the same
    peak on every call fails and names the mistake."""
    from grader import api

    def graded(every_call):
        folder = _varlen_that_allocates(tmp_path / f"every_{every_call}", every_call=every_call)
        return api.grade(folder, ["varlen_attention"], seed=7, checks={"no_batch_sized_memory"}).exercises[0].checks[0]
    once, always = graded(False), graded(True)
    assert always.passed is False and "peaked at" in always.message, always.message
    assert once.passed is True, once.message


@pytest.mark.parametrize("figures, middle, read", [
    ([10, 20, 0], 10, 2),  # two over the bound: the third could not save it
    ([1, 2, 99], 1, 2),  # two under: the third is never made
    ([99, 1, 2], 2, 3),  # one stray charge cannot fail
    ([1, 99, 98], 98, 3),  # over on most readings, whichever the answer could place
    ([None, 7, 9], 7, 3),  # a reading that measured nothing is no evidence either way
    ([None, None, None], None, 3)])
def test_most_readings_decide_a_must_not_and_reading_stops_once_they_agree(figures, middle, read):
    made = []

    def reading():
        made.append(figures[len(made)])
        return None if made[-1] is None else (made[-1], f"reading {len(made)}")
    got = middle_reading(5, reading)
    assert (None if got is None else got[0]) == middle
    assert got is None or got[1] == f"reading {figures.index(middle) + 1}"  # the middle figure's own reading
    assert len(made) == read


@pytest.mark.parametrize("seed", range(20))
def test_close_rows_is_close_of_each_row_alone(seed):
    """Rows of all sizes of value, float32 and float64 inputs, near misses at the tolerance, infinities and NaN
    on either side: each row's verdict is :func:`close` of that row by itself."""
    from grader.checking import close, close_rows, tolerance
    rng = np.random.default_rng(seed)
    want = rng.standard_normal((3, 4, 5, 6)) * 10.0 ** rng.integers(-3, 6, (3, 4, 5, 1))
    q = rng.standard_normal(2).astype(rng.choice([np.float32, np.float64]))
    m = float(10.0 ** rng.uniform(-1, 4))
    scale = np.abs(want).max(axis=-1, keepdims=True)
    steps = rng.choice([0.0, 0.5, 0.99, 1.01, 3.0], want.shape) * rng.choice([-1, 1], want.shape)
    got = want + steps * tolerance((q,), m, scale)
    for array in (got, want):
        special = rng.random(array.shape) < 0.03
        array[special] = rng.choice([np.inf, -np.inf, np.nan], special.sum())
    rows = close_rows(got, want, (q,), m)
    assert rows.shape == want.shape[:-1]
    expected = np.array([close(got[i], want[i], (q,), m) for i in np.ndindex(want.shape[:-1])]).reshape(rows.shape)
    assert (rows == expected).all() and rows.any() and not rows.all()
