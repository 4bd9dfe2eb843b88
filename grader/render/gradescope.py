"""Gradescope's autograder ``results.json``, so a course can use the kit as its autograder.

Each exercise is worth ``POINTS`` points, split evenly over its hidden checks; an exercise
not attempted, or one the grader could not run, is one failed test worth all its points.
Scores are what the result says passed; nothing is re-judged here.
"""
from __future__ import annotations

from ..result import ExerciseResult, Result
from . import interview, pictures
from .common import case_text, exercise_level, overall_level, reproduce, shows_detail

POINTS = 10.0


def render(result: Result) -> dict:
    tests = [t for e in result.exercises for t in _tests(result, e)]
    levels = ", ".join(f"{e.id}: {exercise_level(e)}" for e in result.exercises)
    mistakes = [f"{e.id} / {d.id}: {d.message}" for e in result.exercises for d in e.diagnoses]
    mistakes += [f"{e.id}: {line}" for e in result.exercises if e.status != "not_attempted"
                 for line in interview.hint_lines(e, not shows_detail(result)) + interview.timeline_lines(e)]
    mistakes += interview.session_lines(result)
    return {
        "score": round(sum(t["score"] for t in tests), 4),
        "max_score": round(sum(t["max_score"] for t in tests), 4),
        "output": "\n".join([f"Overall level: {overall_level(result)} ({levels}). Seed {result.seed}.",
                              *mistakes]),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "execution_time": round(result.seconds, 3),
        "tests": tests,
    }


def _tests(result: Result, e: ExerciseResult) -> list[dict]:
    if e.status != "graded" or not e.checks:
        why = "not attempted" if e.status == "not_attempted" else f"could not be graded: {e.error}"
        return [_test(f"{e.id}", 0.0, POINTS, False, f"{e.title}: {why}")]
    share = POINTS / len(e.checks)
    return [_test(f"{e.id}: {c.id}", share if c.passed else 0.0, share, c.passed, _output(result, e, c))
            for c in e.checks]


def _test(name, score, max_score, passed, output) -> dict:
    return {"name": name, "score": round(score, 4), "max_score": round(max_score, 4),
            "status": "passed" if passed else "failed", "output": output, "visibility": "visible"}


def _output(result, e, c) -> str:
    lines = [c.description]
    if not c.passed:
        lines += [x for x in (c.message, c.case and f"tried: {case_text(c.case)}") if x]
        if shows_detail(result):
            lines.append(f"reproduce: {reproduce(result, e.id, c.id)}")
        if c.picture:
            lines += ["", pictures.text(c.picture)]
    return "\n".join(lines)
