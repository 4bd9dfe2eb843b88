"""CONTRACT section 1: the right values in the wrong container cap at hire, and the checks go on
judging the values (checking.expect_array with note_slip; the plugin fails a check with slips
only as hygiene, and only when nothing worse failed)."""
import numpy as np
import pytest

from grader import catalog
from grader.checking import CheckFailure, ExerciseRun, expect_array


@pytest.fixture
def run():
    ex = ExerciseRun(catalog.get("decode_mask"), seed=0, sandbox=None, module_path=None)
    ex.begin_check("some_check")
    return ex


@pytest.mark.parametrize("value, kind, shape", [
    ([[True, False], [True, True]], "b", (2, 2)),            # a list of lists
    (np.array([[1, 0], [1, 1]], np.int8), "b", (2, 2)),      # a 0/1 int mask for a bool one
    ((3, 4, 5), "i", (3,)),                                   # a tuple of ints
    (np.array([3.0, 4.0]), "i", (2,)),                       # integral floats for ints
])
def test_right_values_in_another_container_are_a_slip_and_come_back_as_asked(run, value, kind, shape):
    got = expect_array(value, call="f()", shape=shape, kind=kind)
    assert isinstance(got, np.ndarray) and got.shape == shape and got.dtype.kind == kind
    assert np.array_equal(got.astype(np.float64), np.asarray(value, dtype=np.float64))
    failure = run.slip_failure()
    assert failure.kind == "hygiene" and "f() returned" in failure.message and "slip" in failure.message


@pytest.mark.parametrize("value, kind, shape", [
    ([[True, False]], "b", (2, 2)),                          # a wrong shape
    (np.array([[2, 0], [1, 1]]), "b", (2, 2)),               # a 2 is no bool
    (np.array([3.5, 4.0]), "i", (2,)),                       # a fraction is no int
    ("mask", "b", (2, 2)),                                   # not data at all
])
def test_values_the_asked_kind_cannot_hold_are_a_wrong_answer(run, value, kind, shape):
    with pytest.raises(CheckFailure) as failed:
        expect_array(value, call="f()", shape=shape, kind=kind)
    assert failed.value.kind == "wrong" and run.slip_failure() is None


def test_slips_are_counted_once_per_check_and_forgotten_by_the_next(run):
    for _ in range(3):
        expect_array([1, 2], call="g()", shape=(2,), kind="i")
    assert run.slip_failure().message.endswith("(and 2 more slips)")
    run.begin_check("next_check")
    assert run.slip_failure() is None
