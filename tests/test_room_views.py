"""What a submission shows the candidate under each --feedback, and check descriptions that
would state the rule (a rubric telltale) withheld; built from a result as the engine makes it."""
import pytest

from grader import catalog
from grader.result import CheckResult, Diagnosis, ExerciseResult, Result
from grader.room import views

EXERCISE = catalog.get("decode_mask")
SECRET_INPUT = "with T = 4 over S = 4,096, row 0 sees 1 key"


def run(feedback: str, description: str = "T = 1: the single new query sees every cached key.") -> dict:
    e = ExerciseResult("decode_mask", "graded", level="weak", checks=[
        CheckResult("plain_decode", False, message=f"wrong: {SECRET_INPUT}", description=description,
                    case={"T": 4, "S": 4096}, kind="wrong"),
        CheckResult("prefill", True, description="T = S: prefill is the lower triangle.")],
        diagnoses=[Diagnosis("top_left_alignment", f"top-left aligned: {SECRET_INPUT}", explain="the triangle")],
        reason="weak: top_left_alignment")
    stored = {"id": 3, "at": "2026-01-01T12:00:00+00:00", "kind": "submit", "status": "done",
              "outcome": Result(7, "sub", [e]).to_dict()}
    return views._candidate_run(stored, EXERCISE, feedback)


def test_none_says_only_that_it_was_graded():
    shown = run("none")
    assert shown["graded"] is True and "checks" not in shown
    assert SECRET_INPUT not in str(shown) and "top_left" not in str(shown)


def test_summary_shows_which_checks_pass_and_what_each_tries_and_nothing_else():
    shown = run("summary")
    assert [(c["description"], c["passed"]) for c in shown["checks"]] == [
        ("T = 1: the single new query sees every cached key.", False), ("T = S: prefill is the lower triangle.", True)]
    assert (shown["passed"], shown["total"]) == (1, 2)
    text = str(shown)
    assert SECRET_INPUT not in text and "top_left" not in text and "weak" not in text and "4096" not in text


def test_detail_adds_messages_and_diagnoses():
    shown = run("detail")
    assert SECRET_INPUT in shown["checks"][0]["message"]
    assert [d["id"] for d in shown["diagnoses"]] == ["top_left_alignment"]


@pytest.mark.parametrize("telltale", EXERCISE.rubric.telltales)
def test_a_description_stating_the_rule_is_withheld(telltale):
    spaced = f"Rows sit at {telltale.replace('-', ' - ').upper()}, whatever the shape."
    shown = run("summary", description=spaced)
    assert shown["checks"][0]["description"] == views.WITHHELD
    assert run("summary")["checks"][0]["description"] != views.WITHHELD


def test_an_unfinished_run_shows_its_state_only():
    stored = {"id": 1, "at": "2026-01-01T12:00:00+00:00", "kind": "submit", "status": "running", "outcome": {}}
    assert views._candidate_run(stored, EXERCISE, "detail") == {**{k: stored[k] for k in ("id", "at", "kind")},
                                                                "status": "running", "error": ""}
