"""Section 1's general rules as the softmax/attention family's checks apply them: extreme values,
precision that follows the inputs, containers judged as hygiene, and work counted by the kernel."""

import numpy as np
import pytest

from grader.checking import (CheckFailure, garbage, offset_scores, received,
                             settle_slips, tolerance)
from grader.hidden.nan_safe_softmax import diagnosis as softmax_diagnosis
from grader.hidden.split_kv_decode import diagnosis as split_diagnosis
from grader.hidden.split_kv_decode import oracle as split_oracle


def test_garbage_is_finite_reaches_1e30_and_keeps_the_dtype():
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        values = garbage(rng, (40, 7), dtype)
        assert values.dtype == dtype and np.isfinite(values).all()
        assert np.abs(values).max() >= 1e30 * 0.999 and (values < 0).any() and (values > 0).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_offset_scores_put_each_row_near_its_own_offset(dtype):
    rng = np.random.default_rng(1)
    offsets = np.array([-9e3, -800.0, 0.0, 5e3, 1e4])
    q, k = offset_scores(rng, offsets, 50, 9, dtype)
    assert q.dtype == dtype and k.dtype == dtype
    scores = q.astype(np.float64) @ k.astype(np.float64).T / 3.0
    assert np.all(np.abs(scores - offsets[:, None]) < 8.0)
    assert (scores[0] < -745).all()  # a whole row whose exp underflows


def test_the_right_values_in_a_list_or_another_dtype_are_a_slip_and_still_judged():
    slips = []
    got = received([[0.5, 0.25]], call="f()", shape=(1, 2), kind="f", slips=slips)
    assert isinstance(got, np.ndarray) and got.tolist() == [[0.5, 0.25]] and "list" in slips[0]
    slips = []
    got = received(np.ones(3, np.float32), call="f()", shape=(3,), kind="f", dtype=np.float64, slips=slips)
    assert got.dtype == np.float64 and "float32" in slips[0]
    slips = []
    assert received(np.array([0, 1, 1]), call="m()", shape=(3,), kind="b", slips=slips).tolist() == [0, 1, 1]
    assert "bool" in slips[0]
    slips = []
    assert received(np.ones((2, 2)), call="f()", shape=(2, 2), kind="f", dtype=np.float64, slips=slips).shape == (2, 2)
    assert slips == []  # exactly as asked: nothing to say


def test_a_container_that_changes_the_values_or_the_shape_is_a_wrong_answer():
    for value, kind in [(np.array([0, 2, 1]), "b"), ([1.0, 2.0], "f"), (np.ones((3, 1)), "f"), ("text", "f")]:
        with pytest.raises(CheckFailure) as failure:
            received(value, call="g()", shape=(3,), kind=kind, slips=[])
        assert failure.value.kind == "wrong"


def test_slips_fail_as_hygiene_only_after_the_values_passed(tmp_path):
    with pytest.raises(CheckFailure) as failure:
        settle_slips(["f() returned a list of the right values"])
    assert failure.value.kind == "hygiene"
    settle_slips([])  # no slip: nothing to say



def test_precision_follows_the_inputs_dtype_and_the_scores_magnitude():
    f32, f64 = np.ones(2, np.float32), np.ones(2)
    assert tolerance((f32,), 1e4) > 1000 * tolerance((f32,), 1.0) / 2
    assert tolerance((f64, f32), 1.0) == tolerance((f32,), 1.0)  # the lowest precision among the inputs
    # a careful float32 softmax at scores near 1e4 passes; float32 rounding of float64 scores does not
    scores = np.array([[1e4, 1e4 - 1.0, 1e4 - 3.0]])
    mask = np.ones_like(scores, bool)
    f32_case = softmax_diagnosis.SoftmaxCase(scores.astype(np.float32), mask, "masked_softmax", {})
    s = scores.astype(np.float32)
    careful = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    assert not f32_case.is_off(careful)
    f64_case = softmax_diagnosis.SoftmaxCase(scores + np.array([[0.0, 1e-3, 2e-3]]), mask, "masked_softmax", {})
    rounded = f64_case.scores.astype(np.float32).astype(np.float64)
    lossy = np.exp(rounded - rounded.max()) / np.exp(rounded - rounded.max()).sum()
    assert f64_case.is_off(lossy)


def test_split_tolerances_size_o_by_the_values_and_lse_by_the_scores():
    o, lse = np.full((2, 3), 4.0), np.array([-9e3, 2.0])
    tol = split_diagnosis.Tol.of((np.ones(1, np.float32),), (o, lse))
    assert tol.lse == pytest.approx(tolerance((np.ones(1, np.float32),), 9e3))
    assert tol.o == pytest.approx(4 * tol.lse)


def test_split_covers_are_judged_by_what_they_cover():
    assert split_oracle.is_cover([(0, 0), (0, 0)], 0, 2)
    assert split_oracle.is_cover([(0, 2), (2, 2), (2, 5)], 5, 3)
    assert not split_oracle.is_cover([(0, 3), (2, 5)], 5, 2)  # overlapping
    assert not split_oracle.is_cover([(0, 3), (3, 2), (2, 5)], 5, 3)  # a range running backwards
