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


def level_phrase(level: str | None, provisional: bool = False, to_observe=()) -> str:
    """A level as every format says it: "strong hire (provisional: 3 observations)"."""
    if not provisional:
        return level_word(level)
    n = len(to_observe)
    return f"{level_word(level)} (provisional: {n} observation{'' if n == 1 else 's'})"


def exercise_level(e) -> str:
    return level_phrase(e.level, e.provisional, e.to_observe)


def overall_level(result: Result) -> str:
    return level_phrase(result.overall_level, result.overall_provisional, result.overall_to_observe)


def explanation(e) -> list[str]:
    """Why the level is what it is, what would raise it, and substance apart from hygiene: one
    line each, empty ones left out."""
    return [line for line in (e.reason, e.to_raise, e.hygiene if e.status == "graded" else "") if line]


def reproduce(result: Result, exercise_id: str, check_id: str) -> str:
    """One command that re-runs a single check on the same submission with the same seed."""
    return (f"kvgrade grade {shlex.quote(result.submission)} -e {exercise_id} --seed {result.seed} "
            f"--check {check_id} --feedback detail")


def case_text(case: dict | None) -> str:
    return ", ".join(f"{k} = {v}" for k, v in (case or {}).items())


def shows_detail(result: Result) -> bool:
    return result.feedback != "summary"


def for_candidate(result: Result) -> Result:
    """A copy safe to hand to a candidate: which checks passed and what each tries, nothing more.

    Hidden inputs live in failure messages, cases, pictures and the concrete sentences of
    diagnoses; those go. A diagnosis keeps its id and the rubric's general explanation. The
    interviewer's side (what observed criteria listen for, notes, follow-up questions) goes
    too; that observations are pending stays, so a provisional level still says so.
    """
    safe = copy.deepcopy(result)
    safe.feedback = "summary"
    for e in safe.exercises:
        for c in e.checks:
            c.message, c.case, c.picture = "", None, None
        for d in e.diagnoses:
            d.message = d.explain or d.id.replace("_", " ")
        for c in e.criteria:  # what an interviewer listens for stays theirs; that it is pending does not
            if c.kind == "observed":
                c.text = ""
        e.follow_ups, e.notes, e.about, e.level_guide = [], "", "", {}
        e.interviewer = {}  # the sheet holds the hints' texts and what they cost
    return safe
