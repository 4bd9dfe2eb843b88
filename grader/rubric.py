"""Levels from a rubric: automatic criteria from checks, observed ones from interviewer notes.

A rubric (``rubrics/<id>.toml``) lists criteria, each needed for a level. A criterion with
``checks`` is met when all those checks passed; one with ``observe`` is met or missed only
by the interviewer's notes, and without a note it does not count either way (the report
lists it as still to observe). An exercise reaches the highest level whose criteria, and
those of every level below, are all met; each diagnosis then caps the level.
"""
from __future__ import annotations

from .result import LEVELS, Criterion, Diagnosis, level_rank

DEFAULT_CAP = "weak"


def criteria(rubric: dict, passed: dict[str, bool], observed: dict[str, bool]) -> list[Criterion]:
    out = []
    for c in rubric.get("criteria", []):
        if "checks" in c:
            ok = all(passed.get(check, False) for check in c["checks"])
            status, kind = ("met" if ok else "missed"), "check"
        else:
            kind = "observed"
            status = {True: "met", False: "missed"}.get(observed.get(c["id"]), "to_observe")
        out.append(Criterion(c["id"], c["level"], c.get("text", c.get("observe", "")), kind, status,
                             list(c.get("checks", []))))
    return out


def diagnosis_cap(rubric: dict, diagnosis_id: str) -> tuple[str, str]:
    """(cap, general explanation) of a diagnosis as the rubric states it."""
    for d in rubric.get("diagnoses", []):
        if d["id"] == diagnosis_id:
            return d.get("caps", DEFAULT_CAP), d.get("explain", "")
    return DEFAULT_CAP, ""


def level(crits: list[Criterion], diagnoses: list[Diagnosis]) -> str:
    reached = LEVELS[0]
    for candidate in LEVELS[1:]:
        needed = [c for c in crits if level_rank(c.level) <= level_rank(candidate)]
        if any(c.status == "missed" for c in needed):
            break
        reached = candidate
    for d in diagnoses:
        if level_rank(d.caps) < level_rank(reached):
            reached = d.caps
    return reached


def validate(rubric: dict, exercise_id: str) -> list[str]:
    """Problems in a rubric file, as sentences (empty when it is sound)."""
    problems = []
    for c in rubric.get("criteria", []):
        if c.get("level") not in LEVELS[1:]:
            problems.append(f"{exercise_id}: criterion {c.get('id')} has level {c.get('level')!r}")
        if ("checks" in c) == ("observe" in c):
            problems.append(f"{exercise_id}: criterion {c.get('id')} needs exactly one of checks/observe")
    for d in rubric.get("diagnoses", []):
        if d.get("caps", DEFAULT_CAP) not in LEVELS:
            problems.append(f"{exercise_id}: diagnosis {d.get('id')} caps at {d.get('caps')!r}")
    for key in ("title", "levels", "criteria", "diagnoses", "follow_ups"):
        if key not in rubric:
            problems.append(f"{exercise_id}: rubric has no {key}")
    return problems
