"""What every renderer shares: words for levels, reproduce lines, and candidate-safe redaction.

Nothing here decides a verdict: levels, statuses and diagnoses come from the ``Result``.
"""
from __future__ import annotations

import copy
import shlex

from ..result import Result

LEVEL_WORDS = {"strong_hire": "strong hire", "hire": "hire", "weak": "weak", None: "no level"}
STATUS_WORDS = {"graded": "graded", "not_attempted": "not attempted (not counted)", "error": "error"}
CRITERION_MARKS = {"met": "met", "missed": "missed", "to_observe": "to observe"}


def level_word(level: str | None) -> str:
    return LEVEL_WORDS.get(level, str(level))


def reproduce(result: Result, exercise_id: str, check_id: str) -> str:
    """One command that re-runs a single check on the same submission with the same seed."""
    return (f"kvgrade grade {shlex.quote(result.submission)} -e {exercise_id} --seed {result.seed} "
            f"--check {check_id} --feedback detail")


def case_text(case: dict | None) -> str:
    return ", ".join(f"{k} = {v}" for k, v in (case or {}).items())


def own_tests_text(own_tests: dict | None) -> str:
    """One line on the candidate's own tests: their mutation score and what they missed."""
    if not own_tests:
        return ""
    caught, missed = len(own_tests.get("caught", [])), own_tests.get("missed", [])
    score = own_tests.get("score", 0)
    text = f"own tests: caught {caught} of {caught + len(missed)} known mistakes ({score:.0%})"
    if missed:
        text += "; missed: " + ", ".join(missed)
    if own_tests.get("set_aside"):
        text += f"; {len(own_tests['set_aside'])} test(s) set aside as disagreeing with the contract"
    return text


def shows_detail(result: Result) -> bool:
    return result.feedback != "summary"


def for_candidate(result: Result) -> Result:
    """A copy safe to hand to a candidate: which checks passed and what each tries, nothing more.

    Hidden inputs live in failure messages, cases, pictures and the concrete sentences of
    diagnoses; those go. A diagnosis keeps its id and the rubric's general explanation. The
    interviewer's side (observed criteria, notes, follow-up questions) goes too.
    """
    safe = copy.deepcopy(result)
    safe.feedback = "summary"
    for e in safe.exercises:
        for c in e.checks:
            c.message, c.case, c.picture = "", None, None
        for d in e.diagnoses:
            d.message = d.explain or d.id.replace("_", " ")
        e.criteria = [c for c in e.criteria if c.kind == "check"]
        e.follow_ups, e.notes = [], ""
    return safe
