"""The candidate's own tests: judged test by test, scored against every declared mistake,
and run against a black box they cannot read."""
import contextlib
import json
import os
from dataclasses import asdict

import pytest

from grader import catalog, engine, own_tests
from grader.own_tests import OwnTestsRun, judge, read_junit
from grader.render import html, markdown, terminal
from grader.render.common import for_candidate
from grader.result import Result
from grader.sandbox import Limits
from grader.sandbox.launch import Scratch

DECODE_MASK = catalog.get("decode_mask")
REFERENCE_TESTS = (catalog.KIT_ROOT / "solutions" / "test_decode_mask.py").read_text()
OWN_CHECKS = {"own_tests_pass_on_reference", "own_tests_catch_top_left", "own_tests_mutation_score"}

CONTRACT_SILENT = '''

def test_a_bool_size_is_refused():  # the contract says nothing about T=True
    with pytest.raises(ValueError):
        decode_causal_mask(True, 4)
'''

SNOOPING = '''
import inspect
import decode_mask


def test_no_marker():
    assert not hasattr(decode_mask, "EXPECTED_DIAGNOSIS")


def test_source_has_tril():
    print("OWN-TESTS-OUTPUT")
    assert "tril" not in inspect.getsource(decode_mask.decode_causal_mask)


def test_raw_requests_are_refused():
    link = decode_mask.decode_causal_mask._link
    for request in ({"op": "getattr", "target": None, "name": "EXPECTED_DIAGNOSIS"},
                    {"op": "getattr", "target": None, "name": "__file__"},
                    {"op": "getattr", "target": None, "name": "np"},
                    {"op": "import", "target": None, "name": "inspect"},
                    {"op": "getattr", "target": None, "module": "os", "name": "system"},
                    {"op": "call", "target": None, "name": ["decode_causal_mask"]},
                    {"op": "getattr", "target": 1, "name": "__globals__"},
                    {"op": "call", "target": 12345, "name": None}):
        try:
            value = link.request(request)
        except ValueError as exc:
            assert "refused" in str(exc)
        else:
            assert value is None, value  # a mutant answering would make this test catch it
'''

TOP_LEFT_ONLY = '''
from decode_mask import decode_causal_mask


def test_first_draft_row_sees_the_cache():
    assert decode_causal_mask(2, 5)[0, 1]
'''


GARBLED = '''
import os
import decode_mask


def test_a_garbled_frame():
    os.write(decode_mask.decode_causal_mask._link.to_grader, b"\\xff" * 64)


def test_after_it():
    assert decode_mask.decode_causal_mask(2, 3)[0, 1]
'''


LOOKING_FOR_FILES = '''
import glob
import os


def test_no_implementation_file_is_in_reach():
    found = [path for pattern in ("/tmp/kvgrade-*/**/decode_mask.py", "/tmp/**/solutions/**/*.py")
             for path in glob.glob(pattern, recursive=True)
             if "EXPECTED_DIAGNOSIS" in open(path).read() or "S - T" in open(path).read()]
    assert found == [], found  # on a mutant, finding its file would let this test fail there
'''


def _grade(submission, tests_source, only=None):
    root = submission({"decode_mask.py": DECODE_MASK.reference_path.read_text(),
                       "test_decode_mask.py": tests_source})
    return engine.grade(root, ["decode_mask"], seed=5, only_checks=only).exercise("decode_mask")


def _checks(ex):
    return {c.id: c for c in ex.checks}


WITH_OWN_TESTS = [e for e in catalog.exercises() if own_tests.declaration(e)]


@pytest.mark.parametrize("ex", WITH_OWN_TESTS, ids=lambda e: e.id)
def test_every_declared_variant_is_a_known_mistake_with_a_mutant(ex):
    section = own_tests.declaration(ex)
    assert section is ex.rubric.own_tests  # one source of truth: the typed rubric
    diagnoses = {d.id for d in ex.rubric.diagnoses}
    assert ex.mutant(section.classic).expected_diagnosis in diagnoses and section.classic in section.scored
    assert all(ex.mutant(name).path.is_file() for name in section.scored)
    assert 0 < section.strong_hire_score <= 1
    found = own_tests.variants(ex)
    assert list(found)[0] == "reference" and all(path.is_file() for path in found.values())


def test_decode_mask_scores_only_behaviour_visible_mistakes():
    scored = own_tests.variants(DECODE_MASK)
    assert not [name for name in scored if name not in ("reference", "reference_read_only")
                and DECODE_MASK.mutant(name).expected_diagnosis == "accepts_invalid_sizes"]  # validation only


@pytest.mark.slow
def test_the_reference_tests_score_high(submission):
    ex = _grade(submission, REFERENCE_TESTS, OWN_CHECKS)
    assert all(c.passed for c in ex.checks), [c.message for c in ex.checks]
    assert ex.own_tests["score"] >= 0.8 and ex.own_tests["set_aside"] == []


@pytest.mark.slow
def test_a_contract_silent_test_is_set_aside_and_the_suite_keeps_its_credit(submission):
    ex = _grade(submission, REFERENCE_TESTS + CONTRACT_SILENT)
    assert ex.level == "strong_hire", [(c.id, c.message) for c in ex.checks if not c.passed]
    assert ex.own_tests["set_aside"] == ["test_a_bool_size_is_refused"]
    assert ex.own_tests["score"] == 1.0


@pytest.mark.slow
def test_a_suite_reading_markers_or_source_catches_nothing(submission):
    ex = _grade(submission, SNOOPING, OWN_CHECKS)
    assert ex.own_tests["caught"] == []
    assert set(ex.own_tests["missed"]) == set(own_tests.declaration(DECODE_MASK).scored)
    assert ex.own_tests["set_aside"] == ["test_source_has_tril"]  # getsource fails on the black box
    checks = _checks(ex)
    assert checks["own_tests_pass_on_reference"].passed
    assert not checks["own_tests_catch_top_left"].passed
    assert "t1_only_tests" in {d.id for d in ex.diagnoses}
    assert "OWN-TESTS-OUTPUT" not in json.dumps(asdict(ex))


@pytest.mark.slow
def test_a_suite_catching_only_top_left_is_hire_and_misses_the_score(submission):
    ex = _grade(submission, TOP_LEFT_ONLY)
    assert ex.level == "hire" and "t1_only_tests" not in {d.id for d in ex.diagnoses}
    score = _checks(ex)["own_tests_mutation_score"]
    assert not score.passed and score.kind == "tests"
    missed = "cache_keyed_on_offset, int16_positions, crashes_on_numpy_ints, narrow_size_beside_python_int"
    assert score.message == f"caught 1 of 5 known mistakes; missed: {missed}"
    for text in (terminal.summary(_result(ex)), markdown.render(_result(ex)), html.render(_result(ex))):
        assert f"caught 1 of 5 known mistakes (20%); missed: {missed}" in text


def _result(ex):
    return Result(seed=5, submission="candidate", exercises=[ex])


@pytest.mark.slow
def test_summary_feedback_shows_nothing_of_the_tests_run(submission):
    ex = _grade(submission, SNOOPING, OWN_CHECKS)
    detail = _result(ex)
    assert "test_source_has_tril" in json.dumps(detail.to_dict())  # the set-aside test, by name
    assert "own tests: caught 0 of 5" in terminal.summary(detail)
    safe = for_candidate(detail)
    assert safe.exercises[0].own_tests is None
    for text in (terminal.summary(safe), markdown.render(safe), html.render(safe), json.dumps(safe.to_dict())):
        assert "test_source_has_tril" not in text and "OWN-TESTS-OUTPUT" not in text
        assert "own tests: caught" not in text.lower()


@pytest.mark.slow
def test_a_suite_failing_everywhere_has_nothing_left(submission):
    ex = _grade(submission, "def test_nothing_holds():\n    assert False\n", OWN_CHECKS)
    check = _checks(ex)["own_tests_pass_on_reference"]
    assert not check.passed and check.kind == "tests"
    assert "disagree with the contract: test_nothing_holds" in check.message


LOTTERY = '''
import os

import pytest

_UNLUCKY = int.from_bytes(os.urandom(4), "little") % 200


@pytest.mark.parametrize("i", range(200))
def test_nothing_of_the_mask(i):
    assert i != _UNLUCKY
'''


@pytest.mark.slow
def test_a_suite_failing_one_random_test_per_run_catches_nothing(submission):
    """Red team 24: one of 200 tests failing at random in each run set aside at most two on the correct runs and
    'caught' every known-wrong version (weak to strong_hire). A catch now counts once it fails the same way twice."""
    ex = _grade(submission, LOTTERY, OWN_CHECKS)
    assert ex.own_tests["caught"] == [], ex.own_tests
    assert not _checks(ex)["own_tests_catch_top_left"].passed and not _checks(ex)["own_tests_mutation_score"].passed


@pytest.mark.slow
def test_the_t1_only_mutant_still_draws_its_diagnosis(submission):
    folder = next(m.path for m in DECODE_MASK.mutants if m.expected_diagnosis == "t1_only_tests")
    ex = _grade(submission, (folder / "test_decode_mask.py").read_text(), OWN_CHECKS)
    assert "t1_only_tests" in {d.id for d in ex.diagnoses}
    assert "top_left_past_one_query" in ex.own_tests["missed"]


@pytest.mark.slow
def test_under_bubblewrap_the_tests_cannot_read_the_implementation(submission):
    from tests.test_isolation import needs_bwrap
    needs_bwrap()
    ex = _grade(submission, LOOKING_FOR_FILES, OWN_CHECKS)
    assert ex.own_tests == {"score": 0.0, "caught": [], "set_aside": [],
                            "missed": list(own_tests.declaration(DECODE_MASK).scored)}


def test_own_tests_run_only_when_a_chosen_check_needs_them(submission):
    ex = _grade(submission, REFERENCE_TESTS, {"plain_decode"})
    assert ex.own_tests is None and [c.id for c in ex.checks] == ["plain_decode"]


def test_a_garbled_frame_ends_the_service_not_the_run(tmp_path):
    (tmp_path / "test_decode_mask.py").write_text(GARBLED)
    run = own_tests.run(tmp_path / "test_decode_mask.py", DECODE_MASK.reference_path, DECODE_MASK,
                        Limits(), timeout=30)
    assert run.outcome == "ran" and run.failed == {"test_after_it"}


PROPERTY_SUITE = '''
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from decode_mask import decode_causal_mask


@settings(max_examples=25, database=None)
@given(st.integers(1, 9), st.integers(0, 9))
def test_the_last_query_sees_every_key(T, extra):
    assert decode_causal_mask(T, T + extra)[-1].all()


def test_no_plugin_is_loaded(pytestconfig):
    names = {name for name, _ in pytestconfig.pluginmanager.list_name_plugin()}
    assert not any("hypothesis" in str(name) for name in names), sorted(map(str, names))
'''


@pytest.mark.slow  # whole gradings: the full suite runs it, the fast loop stays under a minute
def test_a_suite_may_use_hypothesis_and_runs_with_no_plugin_loaded(tmp_path):
    """The prompt: the tests run under plain pytest (no plugins) and may import numpy and hypothesis."""
    (tmp_path / "test_decode_mask.py").write_text(PROPERTY_SUITE)
    reference = own_tests.run(tmp_path / "test_decode_mask.py", DECODE_MASK.reference_path, DECODE_MASK, Limits())
    assert reference.outcome == "ran" and len(reference.tests) == 2 and not reference.failed, reference
    top_left = own_tests.variants(DECODE_MASK)["top_left_past_one_query"]
    assert own_tests.run(tmp_path / "test_decode_mask.py", top_left, DECODE_MASK, Limits()).failed == {
        "test_the_last_query_sees_every_key"}


@pytest.mark.slow
def test_any_exercise_can_be_tested_through_the_black_box():
    """gpt2_decode's public tests use a class, a kit helper's classmethod, len and ValueError."""
    gpt2_decode = catalog.get("gpt2_decode")
    tests = gpt2_decode.public_tests[0]
    reference = own_tests.run(tests, gpt2_decode.reference_path, gpt2_decode, Limits())
    assert reference.outcome == "ran" and reference.tests and not reference.failed, reference
    wrong = next(m for m in gpt2_decode.mutants if m.expected_diagnosis == "position_reset")
    assert own_tests.run(tests, wrong.module_path, gpt2_decode, Limits()).failed


# -- judging, on outcomes as pytest reports them -------------------------------------------


def test_judging_sets_aside_tests_that_fail_on_the_reference():
    runs = {"reference": OwnTestsRun("ran", {"a": "passed", "b": "failed", "c": "skipped"}),
            "top_left_alignment": OwnTestsRun("ran", {"a": "passed", "b": "failed", "c": "failed"}),
            "no_mask": OwnTestsRun("ran", {"a": "failed", "b": "passed", "c": "passed"})}
    judgement = judge(runs, ["top_left_alignment", "no_mask"])
    assert (judgement.kept, judgement.set_aside) == (["a"], ["b"])
    assert judgement.caught == ["no_mask"] and judgement.missed == ["top_left_alignment"]
    assert judgement.score == 0.5


def test_a_test_failing_on_the_read_only_reference_is_set_aside():
    """Section 1: a read-only result is fine, so a test that writes into one disagrees with the contract."""
    runs = {"reference": OwnTestsRun("ran", {"a": "passed", "writes": "passed"}),
            own_tests.READ_ONLY: OwnTestsRun("ran", {"a": "passed", "writes": "failed"}),
            "no_mask": OwnTestsRun("ran", {"a": "passed", "writes": "failed"})}
    judgement = judge(runs, ["no_mask"])
    assert (judgement.kept, judgement.set_aside, judgement.caught) == (["a"], ["writes"], [])


WRITES_INTO_RESULT = """
from decode_mask import decode_causal_mask


def test_writes_into_the_mask():
    mask = decode_causal_mask(2, 5)
    mask[:, :3] = False
    assert not mask[:, :3].any()
"""


@pytest.mark.slow
def test_the_read_only_reference_hands_out_read_only_views(tmp_path):
    (tmp_path / "test_decode_mask.py").write_text(WRITES_INTO_RESULT)
    test = tmp_path / "test_decode_mask.py"
    assert not own_tests.run(test, DECODE_MASK.reference_path, DECODE_MASK, Limits()).failed
    assert own_tests.run(test, DECODE_MASK.reference_path, DECODE_MASK, Limits(), read_only=True).failed == {
        "test_writes_into_the_mask"}


def test_a_variant_whose_run_failed_to_run_is_not_caught():
    runs = {"reference": OwnTestsRun("ran", {"a": "passed"}),
            "no_mask": OwnTestsRun("error", detail="the tests did not finish within 5 s")}
    assert judge(runs, ["no_mask"]).missed == ["no_mask"]


# -- the JUnit file is written by the candidate's process ----------------------------------

JUNIT = ('<testsuites><testsuite tests="3"><testcase classname="test_x" name="test_ok"/>'
         '<testcase classname="test_x.TestGroup" name="test_bad"><failure message="no"/></testcase>'
         '<testcase classname="test_x" name="test_later"><skipped/></testcase></testsuite></testsuites>')


@pytest.fixture
def scratch():
    made = Scratch(prefix="kvgrade-junit-test-")
    yield made
    made.remove()


def test_junit_outcomes_are_read_test_by_test(scratch):
    (scratch.root / "junit.xml").write_text(JUNIT)  # written in place, as pytest in the child does
    assert read_junit(scratch) == {"test_ok": "passed", "TestGroup::test_bad": "failed", "test_later": "skipped"}


@pytest.mark.parametrize("swap", ["link", "fifo", "huge", "replaced"])
def test_a_swapped_junit_file_is_not_followed(scratch, tmp_path, swap):
    junit = scratch.root / "junit.xml"
    if swap == "huge":
        padding = " " * (own_tests.JUNIT_MAX_BYTES + 1)
        junit.write_text(f"<testsuites>{padding}</testsuites>")
    else:
        junit.rename(scratch.root / "moved-away.xml")  # kept, so its inode is not reused
        if swap == "link":
            real = tmp_path / "elsewhere.xml"
            real.write_text(JUNIT)
            junit.symlink_to(real)
        elif swap == "fifo":
            os.mkfifo(junit)  # opening a FIFO for reading must not wait for a writer
        else:
            junit.write_text(JUNIT)  # a new file in its place, not the one the grader created
    assert read_junit(scratch) == {}


def test_shared_stages_run_once_per_set_of_test_files_and_never_by_default(tmp_path, monkeypatch):
    """verify's workers share the own-tests stage between gradings whose tests' folder gets the same files (the
    graded module reaches it only as a proxy); a changed test or sibling runs again; a grading of candidates
    (no ``share_stages``) always runs its own."""
    ran = []
    monkeypatch.setattr(own_tests, "run", lambda *a, **kw: ran.append(a[1]) or OwnTestsRun("ran", {"t": "passed"}))
    (tmp_path / "test_decode_mask.py").write_text(REFERENCE_TESTS)
    (tmp_path / "decode_mask.py").write_text("# one module")

    def stage():
        before = len(ran)
        own_tests.run_all(DECODE_MASK, tmp_path / "test_decode_mask.py", _Unlimited(), Limits(), seed=3)
        return len(ran) - before

    declared = len(own_tests.variants(DECODE_MASK))
    assert stage() == declared and stage() == declared  # not shared: each grading runs its own
    monkeypatch.setattr(own_tests, "_SHARED", None)
    own_tests.share_stages()
    assert stage() == declared
    (tmp_path / "decode_mask.py").write_text("# another module, proxied in the tests' folder")
    assert stage() == 0
    (tmp_path / "helper.py").write_text("X = 1")  # a sibling the tests may import
    assert stage() == declared
    (tmp_path / "test_decode_mask.py").write_text(REFERENCE_TESTS + "\n# changed\n")
    assert stage() == declared


class _Unlimited:
    """A sandbox's budget that never runs out (the stage's runs are counted, not made)."""
    @contextlib.contextmanager
    def budgeted(self, longest):
        yield longest
