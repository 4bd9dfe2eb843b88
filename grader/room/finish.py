"""The interviewer's record as the rest of the kit reads it: notes, the level as it stands, and
the final reports (``result.json``, ``report.html``, ``notes.toml`` in the session folder).

Hints sent, observations and notes become a ``Notes`` value, so levels follow ``rubric.judge``
exactly as ``kvgrade report --notes`` would; ``notes.toml`` is that same record as a file.
The timeline comes from the server's own records of every run, and the report says so.
"""
from __future__ import annotations

import json
from datetime import datetime

from ..engine import ExerciseFacts, build_result
from ..notes import Notes, apply, template
from ..result import Result

# one timeline rule for the workspace's log and the room's record
from ..timeline import runs_timeline

REPORTS = ("result.json", "report.html", "notes.toml")
KEPT_BY = ("Kept by the kvgrade serve server on the interviewer's machine: every edit, run, hint and "
           "observation recorded as it happened. The candidate never held this record.")


def notes_data(room) -> dict:
    """``{exercise: {"notes", "hints", "observed"}}`` from the events, the last word on each winning."""
    data = {eid: {"notes": "", "hints": [], "observed": {}} for eid in room.exercises}
    for event in room.store.events():
        section, value = data[event["exercise"]], event["value"]
        if event["kind"] == "hint" and value not in section["hints"]:
            section["hints"] = sorted([*section["hints"], value])
        elif event["kind"] == "observed":
            section["observed"].pop(value["criterion"], None)
            if value["value"] is not None:
                section["observed"][value["criterion"]] = value["value"]
        elif event["kind"] == "note":
            section["notes"] = value
    return data


def standing(room) -> Result:
    """The level as it stands: the final grading once there is one (what the reports say), else each
    exercise's latest submission; with the interviewer's record."""
    done = [r for r in room.store.runs() if r["status"] == "done"]
    final = [r for r in done if r["kind"] == "final"]
    if final:
        return final_result(room, final[-1]["outcome"])
    latest = {r["exercise"]: r["outcome"] for r in done if r["kind"] == "submit"}
    exercises = [Result.from_dict(latest[eid]).exercise(eid) if eid in latest
                 else build_result(ex, ExerciseFacts(), required=True) for eid, ex in room.exercises.items()]
    # the room grades live (an interviewer is there): its standing is re-judged live as well
    return apply(Result(seed=0, submission=str(room.folder), exercises=exercises, live=True), Notes(notes_data(room)))


def final_result(room, outcome: dict) -> Result:
    """The final grading, with the server's timeline and session, and the interviewer's record."""
    result = Result.from_dict(outcome)
    meta = room.store.meta()
    started = datetime.fromisoformat(meta["started"])
    ended = datetime.fromisoformat(meta["ended"])
    result.session = {"started": meta["started"], "minutes": meta["minutes"],
                      "used_minutes": round((ended - started).total_seconds() / 60, 1), "kept_by": KEPT_BY}
    graded = [r for r in room.store.runs() if r["kind"] in ("submit", "final") and r["status"] == "done"]
    for e in result.exercises:
        points = [_point(r, e.id) for r in graded]
        e.timeline = runs_timeline([p for p in points if p], started, 0)
    return apply(result, Notes(notes_data(room)))


def _point(run: dict, exercise_id: str) -> dict | None:
    found = [e for e in run["outcome"].get("exercises", []) if e.get("id") == exercise_id]
    if not found:
        return None
    e = found[0]
    return {"time": datetime.fromisoformat(run["at"]), "passed": sum(bool(c.get("passed")) for c in e["checks"]),
            "total": len(e["checks"]), "diagnoses": [d["id"] for d in e["diagnoses"]]}


def write_reports(room, outcome: dict):
    from ..render import html

    result = final_result(room, outcome)
    texts = {"result.json": json.dumps(result.to_dict(), indent=2), "report.html": html.render(result),
             "notes.toml": template(result)}
    for name, text in texts.items():
        part = room.folder / f".{name}.part"
        part.write_text(text)
        part.replace(room.folder / name)  # a report is whole or absent


def written(room) -> list[str]:
    return [name for name in REPORTS if (room.folder / name).is_file()] if room.ended else []
