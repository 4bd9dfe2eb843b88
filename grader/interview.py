"""The interviewer's sheet of an exercise, from its rubric: what ``kvgrade show ID --interviewer``
prints and the HTML report's "Interviewer's sheet" section holds. Never part of a bundle or of
the candidate's (summary) report.
"""
from __future__ import annotations

from . import catalog

SLOTS = (45, 60, 75, 90)  # interview slots, in minutes
TALK_MINUTES = 15  # introductions, questions and follow-ups around the work


def sheet(exercise: catalog.Exercise) -> dict:
    """Time box, take-home, checkpoints and the staged hints with what each costs once recorded."""
    r = exercise.rubric
    return {"time_box_minutes": r.time_box_minutes, "take_home": r.take_home, "sizing": sizing(exercise),
            "checkpoints": [{"minutes": c.minutes, "expect": c.expect} for c in r.checkpoints],
            "hints": [{"number": i, "text": " ".join(h.text.split()), "caps": h.caps}
                      for i, h in enumerate(r.hints, 1)]}


def sizing(exercise: catalog.Exercise) -> str:
    r = exercise.rubric
    if r.take_home:
        return f"take-home ({_duration(r.time_box_minutes)})"
    if r.time_box_minutes is None:
        return "no time box in the rubric"
    slot = next((m for m in SLOTS if r.time_box_minutes + TALK_MINUTES <= m), None)
    if slot is None:
        return f"{r.time_box_minutes} min of work: longer than a {SLOTS[-1]}-minute slot with the talk around it"
    # the work's time box (kvgrade list's), not the slot: a newcomer read both; and the talk needs its own time
    return f"{r.time_box_minutes} min of work: fits a {slot}-minute slot, with {TALK_MINUTES} min of talk around it"


def _duration(minutes: int | None) -> str:
    if minutes is None:
        return "no time box"
    return f"{minutes} min, about {round(minutes / 60)} h" if minutes >= 120 else f"{minutes} min"


def cost(caps: str) -> str:
    """What a recorded hint costs, in words."""
    return "free: caps nothing" if caps == "strong_hire" else f"caps the level at {caps.replace('_', ' ')}"


def text(exercise: catalog.Exercise) -> str:
    """The whole sheet as plain text for the terminal."""
    r, s = exercise.rubric, sheet(exercise)
    out = [f"Interviewer's sheet: {exercise.id} - {r.title}", "", " ".join(r.summary.split()), "",
           f"Time box: {s['sizing']}."]
    out += [f"  by {c['minutes']} min: {c['expect']}" for c in s["checkpoints"]]
    out += ["", f"Hints, in order (read them out when the candidate is stuck; record them in the notes file as "
                f"[{exercise.id}] hints = N):"]
    out += [f"  {h['number']}. {h['text']}  ({cost(h['caps'])})" for h in s["hints"]]
    observed = [c for c in r.criteria if c.observed]
    if observed:
        out += ["", "Observed criteria (record true / false in the notes file):"]
        out += [f"  - {c.id} ({c.level.replace('_', ' ')}): {' '.join(c.text.split())}" for c in observed]
    out += ["", "Levels:"] + [f"  {level.replace('_', ' ')}: {words}" for level, words in r.levels.items()]
    if r.diagnoses:  # what each named mistake looks like, so the interviewer can spot it in the code
        out += ["", "Classic mistakes the grader names:"]
        out += [f"  - {d.id} (caps {d.caps.replace('_', ' ')}): {' '.join(d.explain.split())}" for d in r.diagnoses]
    if r.follow_ups:
        out += ["", "Follow-up questions:"]
        for i, f in enumerate(r.follow_ups, 1):
            out += [f"  {i}. {' '.join(f.ask.split())}", f"     listen for: {' '.join(f.listen_for.split())}"]
    out += ["", "Sizing of the kit:"] + [f"  {e.id:<22} {sizing(e)}" for e in catalog.exercises()]
    return "\n".join(out)
