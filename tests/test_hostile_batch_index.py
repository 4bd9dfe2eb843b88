"""The batch index and the report's overall box, measured in headless Chromium (issue 28, item 5):
every exercise id whole in the rotated header, and each overall level with its one-line reason."""
import json

import pytest

from grader import catalog
from grader.render import html
from grader.result import CheckResult, ExerciseResult, Result
from grader.rubric import judge

from . import browser

HINTED = "nan_safe_softmax"


def hinted_result() -> Result:
    """Every exercise with every check passed; an interviewer recorded hint 2 on nan_safe_softmax."""
    exercises = []
    for ex in catalog.exercises():
        checks = [CheckResult(c, True) for c in sorted(ex.rubric.check_ids)]
        hints = (1,) if ex.id == HINTED else ()
        e = ExerciseResult(ex.id, "graded", checks=checks, required=True, title=ex.title)
        exercises.append(e.judged(judge(ex.rubric, checks, [], {}, hints)))
    return Result(seed=0, submission="alice", exercises=exercises)


def test_the_overall_reason_names_what_set_the_level():
    result = hinted_result()
    assert result.overall_level == "hire"
    assert result.overall_reason == f"{HINTED}: hint 2 given (caps at hire)"
    assert json.loads(json.dumps(result.to_dict()))["overall"]["reason"] == result.overall_reason


def test_the_overall_reason_counts_the_exercises_it_leaves_out_in_plain_english():
    """A newcomer pass: "and 8 exercises more"."""
    result = hinted_result()
    for e in result.exercises:
        e.level, e.reason = "hire", "hire: a reason"
    assert result.overall_reason.endswith(f"; and {len(result.exercises) - 2} more exercises")
    result.exercises = result.exercises[:3]
    assert result.overall_reason.endswith("; and 1 more exercise")


def row(name: str, result: Result) -> dict:
    return {"rank": 1, "name": name, "level": result.overall_level, "score": result.score,
            "provisional": result.overall_provisional, "to_observe": len(result.overall_to_observe),
            "reason": result.overall_reason, "report": f"{name}/report.html", "error": None,
            "exercises": {e.id: {"level": e.level, "status": e.status, "provisional": e.provisional,
                                 "required": True, "checks": f"{e.passed_checks}/{len(e.checks)}"}
                          for e in result.exercises}}


@pytest.mark.browser
def test_every_exercise_id_is_whole_in_the_rotated_header_and_the_reason_is_shown(tmp_path):
    result = hinted_result()
    ids = [e.id for e in catalog.exercises()]
    page = html.render_batch([row("alice", result), row("bob", result)], "kvgrade batch", 0, ids)
    shown = browser.measure(page, """{
        heads: [...document.querySelectorAll('th.ex span')].map(s => s.textContent),
        clipped: [...document.querySelectorAll('th.ex span')].filter(s => s.scrollHeight > s.clientHeight + 1
                   || s.getBoundingClientRect().height < s.scrollHeight - 1).length,
        reasons: [...document.querySelectorAll('td.overall-cell .reason')].map(r => [r.textContent,
                   r.getBoundingClientRect().right, r.getBoundingClientRect().height]),
        page: document.documentElement.scrollWidth}""", tmp_path)
    assert shown["heads"] == ids  # tile_classification whole, not t_classification
    assert shown["clipped"] == 0
    assert [r[0] for r in shown["reasons"]] == [result.overall_reason] * 2
    assert all(0 < height and right <= 1280 for _, right, height in shown["reasons"])
    assert shown["page"] <= 1280


@pytest.mark.browser
def test_the_reports_overall_box_gives_the_reason(tmp_path):
    result = hinted_result()
    shown = browser.measure(html.render(result), """[...document.querySelectorAll('.overall .reason')].map(
        r => [r.textContent, r.getBoundingClientRect().height])""", tmp_path)
    assert len(shown) == 1 and shown[0][0] == result.overall_reason and shown[0][1] > 0


def test_the_batch_summary_gives_the_reason_in_each_row():
    from grader.render import markdown

    result = hinted_result()
    summary = markdown.batch_summary([row("alice", result)], [e.id for e in result.exercises], 0)
    line = next(line for line in summary.splitlines() if "`alice`" in line)
    assert line.startswith("| 1 | `alice` | **hire** |") and line.endswith(f"| {result.overall_reason} |")
