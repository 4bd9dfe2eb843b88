"""Grading whole submissions: statuses, levels, diagnoses, limits and reproducibility."""
import json

import numpy as np
import pytest

from grader import engine
from grader.notes import Notes
from grader.result import Result
from grader.sandbox import Limits

from .conftest import EXAMPLES

FAST = Limits(call_seconds=2)


@pytest.mark.slow
def test_the_reference_folder_reaches_strong_hire():
    result = engine.grade("solutions", ["decode_mask"], seed=3)
    ex = result.exercise("decode_mask")
    assert ex.status == "graded" and ex.level == "strong_hire"
    assert all(c.passed for c in ex.checks) and ex.diagnoses == []
    assert {c.status for c in ex.criteria if c.kind == "observed"} == {"to_observe"}


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_top_left_with_weak_tests_is_weak_and_named(top_left_example):
    ex = engine.grade(top_left_example, ["decode_mask"], seed=0).exercise("decode_mask")
    assert ex.level == "weak"
    assert {d.id for d in ex.diagnoses} >= {"top_left_alignment", "t1_only_tests"}
    failing = {c.id for c in ex.checks if not c.passed}
    assert "random_shapes" in failing and "plain_decode" in failing
    assert "own_tests_pass_on_reference" not in failing


@pytest.mark.slow
def test_a_hang_is_reported_within_the_limit_and_other_checks_are_graded():
    ex = engine.grade(EXAMPLES / "hangs", ["decode_mask"], limits=FAST, seed=0).exercise("decode_mask")
    assert ex.status == "graded" and ex.level == "weak"
    by_id = {c.id: c for c in ex.checks}
    assert "did not finish within 2 s" in by_id["chunked_prefill"].message
    assert by_id["plain_decode"].passed and by_id["prefill"].passed  # bounded by the call limit, not a stopwatch


def test_a_missing_module_is_not_attempted(tmp_path):
    # a folder with no exercise module at all is refused (issue 13.1): this one holds another's
    (tmp_path / "tree_mask.py").write_text("def f():\n    raise NotImplementedError\n")
    ex = engine.grade(tmp_path, seed=0).exercise("decode_mask")
    assert (ex.status, ex.level, ex.counted) == ("not_attempted", None, False)
    required = engine.grade(tmp_path, ["decode_mask"], seed=0).exercise("decode_mask")  # an interview set
    assert (required.status, required.level, required.counted) == ("not_attempted", "weak", True)


def test_an_import_error_is_an_error_with_one_line(submission):
    root = submission({"decode_mask/decode_mask.py": "import numpy\ndef f(:\n"})
    ex = engine.grade(root, ["decode_mask"], seed=0).exercise("decode_mask")
    assert ex.status == "error" and ex.level == "weak"
    assert ex.error.startswith("importing decode_mask.py raised SyntaxError")
    assert ex.error.endswith("at decode_mask.py:2") and "frozen" not in ex.error  # the line, not the importer's


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_a_monkeypatched_numpy_fools_only_its_own_process(submission):
    source = '''
import numpy as np
np.array_equal = lambda *a, **k: True
np.testing.assert_array_equal = lambda *a, **k: None
def decode_causal_mask(T, S):
    if not 1 <= T <= S:
        raise ValueError("bad")
    return np.tril(np.ones((T, S), dtype=bool))
'''
    ex = engine.grade(submission({"decode_mask.py": source}), ["decode_mask"], seed=0).exercise("decode_mask")
    assert ex.level == "weak" and "top_left_alignment" in {d.id for d in ex.diagnoses}
    assert np.array_equal(np.zeros(2), np.zeros(2)) and not np.array_equal(np.zeros(2), np.ones(2))


def test_a_scalar_is_not_a_mask(submission):
    source = "def decode_causal_mask(T, S):\n    if T > S or T < 1: raise ValueError('no')\n    return True\n"
    ex = engine.grade(submission({"decode_mask.py": source}), ["decode_mask"], seed=0).exercise("decode_mask")
    message = {c.id: c.message for c in ex.checks}["dtype_and_shape"]
    assert message == "decode_causal_mask(1, 1) returned True; expected a numpy bool array of shape (1, 1)"


@pytest.mark.slow  # grades several times
def test_same_seed_same_result_and_seed_changes_shapes(top_left_example):
    a = engine.grade(top_left_example, ["decode_mask"], seed=11).to_dict()
    b = engine.grade(top_left_example, ["decode_mask"], seed=11).to_dict()
    c = engine.grade(top_left_example, ["decode_mask"], seed=12).to_dict()
    def strip(r):
        return [(x["id"], x["passed"], x["message"]) for e in r["exercises"] for x in e["checks"]]
    assert strip(a) == strip(b)
    assert strip(a) != strip(c)


@pytest.mark.slow
def test_observed_criteria_count_once_the_interviewer_records_them(tmp_path):
    notes = tmp_path / "notes.toml"
    notes.write_text('[decode_mask]\nnotes = "hesitant"\n[decode_mask.observed]\n'
                     "names_library_conventions = false\n")
    ex = engine.grade("solutions", ["decode_mask"], notes=Notes.load(notes), seed=0).exercise("decode_mask")
    assert ex.level == "hire" and ex.notes == "hesitant"


@pytest.mark.slow
def test_the_result_round_trips_through_json(top_left_example):
    result = engine.grade(top_left_example, ["decode_mask"], seed=0)
    again = Result.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.to_dict() == result.to_dict()
