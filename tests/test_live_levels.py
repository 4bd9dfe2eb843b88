"""Live grading (issue 22, "Calibration for a live interview"): validation written with asserts is
for the interviewer to observe, not a cap; only the interviewer's side makes a grading live."""
import inspect
import json

import pytest
from click.testing import CliRunner

from grader import catalog, engine
from grader.cli import main
from grader.result import CheckResult
from grader.room.session import Room
from grader.rubric import LIVE_ASK, judge

TREE = catalog.get("tree_mask")


def tree_checks(failing: dict[str, str]) -> list[CheckResult]:
    """Every hidden check of tree_mask passed, except ``failing`` (check id -> failure kind)."""
    return [CheckResult(c, c not in failing, kind=failing.get(c)) for c in sorted(TREE.rubric.check_ids)]


VALIDATION = {"rejects_invalid_parents": "hygiene", "rejects_invalid_cache_length": "hygiene"}
ASSERTS = [TREE.rubric.make_diagnosis("accepts_invalid_parents", "tree_attention_mask([-1, 5], 3) did not raise")]


def test_validation_failures_cap_a_take_home_at_hire():
    judged = judge(TREE.rubric, tree_checks(VALIDATION), ASSERTS, {})
    assert judged.level == "hire" and "rejects_invalid_parents (hygiene)" in judged.reason


def test_live_they_become_an_observation_and_the_level_a_provisional_strong_hire():
    judged = judge(TREE.rubric, tree_checks(VALIDATION), ASSERTS, {}, live=True)
    assert (judged.level, judged.provisional) == ("strong_hire", True)
    asked = next(c for c in judged.criteria if c.id == "validates_inputs")
    assert (asked.kind, asked.status) == ("observed", "to_observe") and asked.text.startswith(LIVE_ASK)
    assert "validates_inputs" in judged.to_observe
    assert judge(TREE.rubric, tree_checks(VALIDATION), ASSERTS, {"validates_inputs": False}, live=True).level == "hire"
    assert judge(TREE.rubric, tree_checks(VALIDATION), ASSERTS, {"validates_inputs": True}, live=True).level \
        == "strong_hire"


def test_live_waives_validation_only():
    wrong = {**VALIDATION, "positions_random_trees": "wrong"}
    assert judge(TREE.rubric, tree_checks(wrong), ASSERTS, {}, live=True).level == "weak"
    dtype = {**VALIDATION, "positions_are_int64": "hygiene"}  # a dtype slip is not validation
    assert judge(TREE.rubric, tree_checks(dtype), ASSERTS, {}, live=True).level == "hire"
    crashed = {"rejects_invalid_parents": "crash"}  # a crash, not a missing ValueError
    assert judge(TREE.rubric, tree_checks(crashed), [], {}, live=True).level == "weak"
    every = judge(TREE.rubric, tree_checks({}), [], {}, live=True)  # validation that passes is met, as ever
    assert next(c for c in every.criteria if c.id == "validates_inputs").status == "met"


def test_every_rubric_marks_its_validation_criteria_and_diagnoses():
    for ex in catalog.exercises():
        marked = [c.id for c in ex.rubric.criteria if c.validation]
        assert marked, ex.id
        assert all(d.caps == "hire" for d in ex.rubric.diagnoses if d.validation), ex.id


def test_live_is_a_keyword_of_the_grading_function_defaulting_to_false():
    parameter = inspect.signature(engine.grade).parameters["live"]
    assert parameter.default is False and parameter.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


SHOWN_RAISE = 'raise ValueError(f"parents[{i}]'  # the case the public tests show: a draft its own parent


def _asserting(tmp_path, name: str, keep_shown: bool):
    """The tree_mask reference validating with asserts; ``keep_shown``: the ValueError the public
    tests show stays, as a candidate who ran them keeps it."""
    source = (catalog.KIT_ROOT / "solutions" / "tree_mask.py").read_text()
    assert source.count("raise ValueError(") == 4 and source.count(SHOWN_RAISE) == 1
    if keep_shown:
        source = source.replace(SHOWN_RAISE, "raise KeepValueError(f\"parents[{i}]")
    source = source.replace("raise ValueError(", "raise AssertionError(").replace("KeepValueError", "ValueError")
    sub = tmp_path / name
    sub.mkdir()
    (sub / "tree_mask.py").write_text(source)
    return sub


@pytest.mark.slow  # grades a submission three times through the real CLI
def test_an_assert_validating_answer_live_and_as_a_take_home(tmp_path):
    sub = _asserting(tmp_path, "sub", keep_shown=True)
    for name in ("live", ".live", "kvgrade.toml"):  # a file in the submission never makes a grading live
        (sub / name).write_text("live = true\n")
    levels = {}
    for how in ("take_home", "live"):
        out = tmp_path / f"{how}.json"
        done = CliRunner().invoke(main, ["grade", str(sub), "-e", "tree_mask", "--json", str(out),
                                         *(["--live"] if how == "live" else [])])
        assert done.exit_code == 0, done.output
        levels[how] = json.loads(out.read_text())
    take_home, live = levels["take_home"], levels["live"]
    assert (take_home["live"], take_home["overall"]["level"]) == (False, "hire")
    assert "hygiene missing" in take_home["exercises"][0]["hygiene"]
    assert (live["live"], live["overall"]["level"], live["overall"]["provisional"]) == (True, "strong_hire", True)
    assert "tree_mask.validates_inputs" in live["overall"]["to_observe"]
    again = CliRunner().invoke(main, ["report", str(tmp_path / "live.json")])  # re-judged live, as it was graded
    assert again.exit_code == 0 and "caution" not in again.output and "graded live" in again.output
    assert "strong hire (provisional" in again.output
    room = Room(tmp_path / "session", ["tree_mask"], None, None)  # the live room's standing, re-judged live too
    try:
        room.store.finish_run(room.store.start_run("submit", "tree_mask", 1), "done", live)
        standing = next(e for e in room.interviewer_view()["exercises"] if e["id"] == "tree_mask")
        assert (standing["level"], standing["provisional"]) == ("strong_hire", True), standing["reason"]
    finally:
        room.close()


@pytest.mark.slow
def test_live_still_judges_the_invalid_case_the_public_tests_show(tmp_path):
    """Validation beyond what the prompt shows is the interviewer's to ask about; the case the
    public tests show is not: an answer that fails it is hire, live too."""
    sub = _asserting(tmp_path, "all_asserts", keep_shown=False)
    result = engine.grade(sub, ["tree_mask"], seed=3, live=True).exercise("tree_mask")
    shown = next(c for c in result.checks if c.id == "rejects_the_invalid_case_shown")
    assert not shown.passed and shown.kind == "hygiene" and "AssertionError" in shown.message
    assert (result.level, result.provisional) == ("hire", False)


@pytest.mark.slow  # grades the variant live
def test_verify_holds_a_variant_to_its_stated_live_level(tmp_path):
    """verify grades a variant that states EXPECTED_LIVE_LEVEL a second time, live, and holds it to
    exactly that level: the asserting paged cache reaches strong_hire (provisional), not hire."""
    from grader import verify

    ex = catalog.get("paged_kv_cache")
    path = next(p for p in ex.correct_variants if p.stem == "asserts_validation")
    live = engine.grade(verify.variant_submission(path, ex.id, tmp_path), [ex.id], seed=2, live=True)
    take_home = verify.Outcome(ex.id, "variant:asserts_validation", True, "take-home")
    assert verify.judge_live_variant(ex, path, "strong_hire", live, take_home).ok
    assert not verify.judge_live_variant(ex, path, "hire", live, take_home).ok
