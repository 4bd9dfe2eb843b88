"""What each page may see, built from the session's records.

The candidate's view is made here and nowhere else, from an allow-list: the prompt, their own
files, the public tests the prompt names (read-only), hints the interviewer sent, and each run as
the chosen feedback shows it (``none``: that it was graded; ``summary``: which checks pass and
what each tries, no inputs, messages or diagnoses; ``detail``: messages and diagnoses too). A
check description that would state the rubric's rule (one of its ``telltales``) is replaced.
The interviewer's view holds everything.
"""
from __future__ import annotations

from .. import catalog, interview, own_tests
from ..render.common import for_candidate, what_happened
from ..result import Result
from . import finish

RUN_KINDS = ("public", "own", "submit")  # the candidate's runs; "final" is the end's own grading
WITHHELD = "a hidden check (its description would give the answer away)"


def own_tests_file(exercise: catalog.Exercise) -> str | None:
    """The name of the candidate's own tests, as the prompt gives it (and the grader reads it), where the
    rubric asks for some; else None."""
    return f"test_{exercise.id}.py" if own_tests.declaration(exercise) is not None else None


def files_of(exercise: catalog.Exercise) -> list[str]:
    """The files a candidate edits: the module, and their own tests where the rubric asks for some."""
    return [exercise.stub_path.name, *filter(None, [own_tests_file(exercise)])]


def public_files(exercise: catalog.Exercise) -> list[dict]:
    """The kit's public tests the prompt names, shown read-only beside the candidate's files: the prompt
    sends the candidate to them ("`test_ID_public.py`: the public tests"), and "Run public tests" runs them."""
    prompt = exercise.prompt_path.read_text()
    return [{"name": p.name, "text": p.read_text()} for p in exercise.public_tests if p.name in prompt]


def candidate(room) -> dict:
    meta, runs, hints = room.store.meta(), room.store.runs(), room.store.events("hint")
    exercises = []
    for eid, ex in room.exercises.items():
        sent = sorted({h["value"] for h in hints if h["exercise"] == eid})
        exercises.append({
            "id": eid, "title": ex.title, "prompt": ex.prompt_path.read_text(), "files": _files(room, eid),
            "public_files": public_files(ex), "own_tests": own_tests_file(ex),
            "hints": [{"number": n, "text": " ".join(ex.rubric.hints[n - 1].text.split())} for n in sent],
            "runs": [_candidate_run(r, ex, meta["feedback"]) for r in runs
                     if r["exercise"] == eid and r["kind"] in RUN_KINDS]})
    return {"role": "candidate", "ended": meta.get("ended") is not None, "feedback": meta["feedback"],
            "minutes": meta["minutes"], "remaining_seconds": room.remaining_seconds(), "exercises": exercises}


def interviewer(room) -> dict:
    meta, runs = room.store.meta(), room.store.runs()
    notes, standing = finish.notes_data(room), finish.standing(room)
    exercises = []
    for eid, ex in room.exercises.items():
        e = standing.exercise(eid)
        exercises.append({
            "id": eid, "title": ex.title, "files": _files(room, eid), "sheet": _sheet(ex),
            "hints_sent": notes[eid]["hints"], "observed": notes[eid]["observed"], "notes": notes[eid]["notes"],
            "level": e.level, "provisional": e.provisional, "reason": e.reason,
            "runs": [_interviewer_run(r, eid) for r in runs if eid in r["exercise"].split(",")]})
    finals = [_interviewer_run(r) for r in runs if r["kind"] == "final"]
    return {"role": "interviewer", "ended": meta.get("ended") is not None, "feedback": meta["feedback"],
            "minutes": meta["minutes"], "remaining_seconds": room.remaining_seconds(), "exercises": exercises,
            "overall": standing.overall_level, "overall_provisional": standing.overall_provisional,
            "final": finals[-1] if finals else None, "reports": finish.written(room)}


def _files(room, eid: str) -> list[dict]:
    saved = room.store.files()
    return [{"name": n, "text": saved[(eid, n)]} for n in files_of(room.exercises[eid])]


def _sheet(ex) -> dict:
    r = ex.rubric
    return {**interview.sheet(ex),
            "observed": [{"id": c.id, "level": c.level, "text": " ".join(c.text.split())}
                         for c in r.criteria if c.observed],
            "follow_ups": [{"ask": " ".join(f.ask.split()), "listen_for": " ".join(f.listen_for.split())}
                           for f in r.follow_ups],
            "mistakes": [{"id": d.id, "explain": d.explain} for d in r.diagnoses],
            "levels": dict(r.levels)}


def _candidate_run(run: dict, ex, feedback: str) -> dict:
    out = {"id": run["id"], "at": run["at"], "kind": run["kind"], "status": run["status"]}
    outcome = run["outcome"]
    if run["status"] != "done":
        return {**out, "error": outcome.get("error", "")}
    if run["kind"] in ("public", "own"):
        return {**out, **{k: outcome.get(k) for k in ("exit", "tests", "output")}}
    if feedback == "none":
        return {**out, "graded": True}
    e = Result.from_dict(outcome).exercise(ex.id)
    if feedback == "summary":
        e = for_candidate(Result(0, "", [e]), show_levels=False).exercises[0]
    checks = [{"description": _told(ex, c.description), "passed": c.passed,
               **({"message": what_happened(c)} if feedback == "detail" else {})} for c in e.checks]
    out.update(status_of_code=e.status, error=e.error or "", checks=checks,
               passed=sum(c.passed for c in e.checks), total=len(e.checks))
    if feedback == "detail":
        out["diagnoses"] = [{"id": d.id, "message": d.message} for d in e.diagnoses]
    return out


def _interviewer_run(run: dict, only: str | None = None) -> dict:
    """A run as the interviewer sees it; under one exercise's section (``only``), that exercise's part of it
    (the final grading covers every exercise of the session)."""
    out = {k: run[k] for k in ("id", "at", "kind", "exercise", "status")}
    out["seed"] = None if run["seed"] is None else str(run["seed"])  # 63 bits: more than a JavaScript number holds
    outcome = run["outcome"]
    if run["status"] != "done" or run["kind"] in ("public", "own"):
        return {**out, **outcome}
    result = Result.from_dict(outcome)
    out["exercises"] = [{
        "id": e.id, "status": e.status, "level": e.level, "provisional": e.provisional, "error": e.error or "",
        "reason": e.reason, "passed": e.passed_checks, "total": len(e.checks),
        "checks": [{"id": c.id, "passed": c.passed, "description": c.description, "message": what_happened(c),
                    "kind": c.kind} for c in e.checks],  # each diagnosis said once, below: a tag here
        "diagnoses": [{"id": d.id, "message": d.message} for d in e.diagnoses]}
        for e in result.exercises if only is None or e.id == only]
    return out


def _told(ex, description: str) -> str:
    """The description, unless it states the rule being tested (``Rubric.states_rule``)."""
    return WITHHELD if ex.rubric.states_rule(description) else description
