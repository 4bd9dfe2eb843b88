"""Gradescope's autograder ``results.json``, so a course can use the kit as its autograder.

Each exercise is worth ``POINTS`` points, split over its hidden checks in hundredths by the
largest-remainder rule, so every exercise sums exactly to ``POINTS`` and the total to a whole
number of points per exercise. An exercise not attempted, or one the grader could not run, is
one failed test worth all its points. Scores are what the result says passed; nothing is
re-judged here. Gradescope output is student-facing: the CLI renders it from summary feedback
unless asked otherwise.
"""
from __future__ import annotations

from ..result import ExerciseResult, Result
from . import interview
from .common import (REPLAY_NOTE, caveats, exercise_level, failure_lines, levels_shown, overall_level, replay,
                     shows_detail)

POINTS = 10
CENTS = 100  # points are split in hundredths


def render(result: Result) -> dict:
    tests = [t for e in result.exercises for t in _tests(result, e)]
    head = f"Seed {result.seed}."
    if levels_shown(result):
        levels = ", ".join(f"{e.id}: {exercise_level(e)}" for e in result.exercises)
        head = f"Overall level: {overall_level(result)} ({levels}). " + head
    mistakes = [f"{e.id} / {d.id}: {d.message}" for e in result.exercises for d in e.diagnoses]
    mistakes += [f"{e.id}: {line}" for e in result.exercises if e.status != "not_attempted"
                 for line in interview.hint_lines(e, not shows_detail(result))  # no offer here
                 + interview.timeline_lines(e)]
    mistakes += interview.session_lines(result)
    mistakes += [f"{e.id}: {REPLAY_NOTE}: {replay(result, e)}" for e in result.exercises if replay(result, e)]
    head = " ".join([*caveats(result), head])
    return {
        "score": sum(t["cents"] for t in tests if t["status"] == "passed") / CENTS,
        "max_score": sum(t["cents"] for t in tests) / CENTS,
        "output": "\n".join([head, *mistakes]),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "execution_time": round(result.seconds, 3),
        "tests": [_public(t) for t in tests],
    }


def shares(total: int, count: int) -> list[int]:
    """``total`` split into ``count`` whole parts that differ by at most one and sum to ``total``."""
    base, extra = divmod(total, count)
    return [base + (i < extra) for i in range(count)]


def _tests(result: Result, e: ExerciseResult) -> list[dict]:
    if e.status != "graded" or not e.checks:
        why = "not attempted" if e.status == "not_attempted" else f"could not be graded: {e.error}"
        return [_test(e.id, POINTS * CENTS, False, f"{e.title}: {why}")]
    return [_test(f"{e.id}: {c.id}", cents, c.passed,
                  c.description if c.passed else "\n".join(failure_lines(result, e.id, c)))
            for c, cents in zip(e.checks, shares(POINTS * CENTS, len(e.checks)))]


def _test(name, cents, passed, output) -> dict:
    return {"name": name, "cents": cents, "status": "passed" if passed else "failed", "output": output}


def _public(test: dict) -> dict:
    return {"name": test["name"], "score": test["cents"] / CENTS if test["status"] == "passed" else 0.0,
            "max_score": test["cents"] / CENTS, "status": test["status"], "output": test["output"],
            "visibility": "visible"}
