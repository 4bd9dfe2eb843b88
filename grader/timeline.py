"""Interview mode's logs, kept in a workspace made by ``kvgrade start``: ``DIR/.kvgrade/``.

- ``workspace.json``: when the workspace was made, its exercises and an optional time box;
- ``attempts.jsonl``: one line per exercise per ``kvgrade grade`` run inside the workspace;
- ``hints.jsonl``: one line per hint ``kvgrade hint`` printed.

All three live on the candidate's machine, so they are context for an interviewer and never
evidence: no level reads them. Read back, they are hostile data: only regular files are
opened (never through a symlink), reads stop at ``MAX_LOG_BYTES``, and a line that is not a
well-formed record is skipped.
"""
from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

from . import plainfile

LOG_DIR = ".kvgrade"
WORKSPACE, ATTEMPTS, HINTS = "workspace.json", "attempts.jsonl", "hints.jsonl"
MAX_LOG_BYTES = 1 << 20
MAX_ID = 64  # longer exercise or diagnosis ids are not the kit's: the line is skipped
KEPT_BY = ("Kept on the candidate's machine by kvgrade start / grade / hint: context for the "
           "interviewer, not tamper-proof evidence, and it never changes a level.")


class LogError(Exception):
    """A log cannot be written (not a folder, a symlink where the log should be, no permission)."""


def now() -> datetime:
    return datetime.now(timezone.utc)


# ---------------------------------------------------------------------------- writing

def create(root: Path, exercise_ids: list[str], minutes: int | None, when: datetime | None = None):
    """Mark ``root`` as a workspace: start time, exercises, time box."""
    record = {"started": _stamp(when or now()), "exercises": exercise_ids, "minutes": minutes}
    _append(root, WORKSPACE, record, fresh=True)


def is_workspace(root: Path) -> bool:
    return read_workspace(root) is not None


def record_attempt(root: Path, result, when: datetime | None = None):
    """Append one line per exercise graded (or failed to load) in ``result``."""
    seen = hints_seen(root)
    for e in result.exercises:
        if e.status == "not_attempted":
            continue
        _append(root, ATTEMPTS, {
            "time": _stamp(when or now()), "exercise": e.id, "passed": e.passed_checks, "total": len(e.checks),
            "diagnoses": [d.id for d in e.diagnoses], "level": e.level, "hints": seen.get(e.id, 0)})


def record_hint(root: Path, exercise_id: str, number: int, when: datetime | None = None):
    _append(root, HINTS, {"time": _stamp(when or now()), "exercise": exercise_id, "hint": number})


def _append(root: Path, name: str, record: dict, fresh: bool = False):
    folder = Path(root) / LOG_DIR
    try:
        if folder.is_symlink():
            raise LogError(f"{folder} is a symlink; kvgrade writes its logs only into a real folder")
        folder.mkdir(exist_ok=True)
        # Non-blocking: opening a planted FIFO for writing fails at once instead of waiting forever.
        # Never truncated before fstat: a hard link planted as the log must not empty another file.
        flags = os.O_WRONLY | os.O_CREAT | (0 if fresh else os.O_APPEND)
        try:
            fd = plainfile.open_plain(folder / name, flags, single_link=True)
        except plainfile.NotPlain:
            raise LogError(f"{folder / name} is not a regular file of its own (a FIFO, a device or a hard "
                           "link); kvgrade writes its logs only into files it made") from None
        with os.fdopen(fd, "w" if fresh else "a", encoding="utf-8") as fh:
            if fresh:
                fh.truncate(0)
                fh.seek(0)
            fh.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:
        raise LogError(f"cannot write {folder / name}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------------------- reading (hostile)

def read_workspace(root: Path) -> dict | None:
    """The workspace record, or None when ``root`` was not made by ``kvgrade start`` (or the
    record is unusable)."""
    lines = _records(root, WORKSPACE)
    if not lines:
        return None
    record = lines[0]
    started = _time(record.get("started"))
    minutes = record.get("minutes")
    if started is None or not (minutes is None or (type(minutes) is int and 0 < minutes <= 24 * 60)):
        return None
    exercises = record.get("exercises")
    exercises = [e for e in exercises if _id(e)] if isinstance(exercises, list) else []
    return {"started": started, "minutes": minutes, "exercises": exercises}


def attempts(root: Path) -> list[dict]:
    """Well-formed attempt records, oldest first; malformed lines are skipped."""
    out = []
    for r in _records(root, ATTEMPTS):
        when, total, passed = _time(r.get("time")), r.get("total"), r.get("passed")
        diagnoses = r.get("diagnoses")
        if (when is None or not _id(r.get("exercise")) or not _count(total) or not _count(passed)
                or passed > total or not isinstance(diagnoses, list) or not all(map(_id, diagnoses))
                or r.get("level") not in (None, "weak", "hire", "strong_hire") or not _count(r.get("hints", 0))):
            continue
        out.append({"time": when, "exercise": r["exercise"], "passed": passed, "total": total,
                    "diagnoses": list(dict.fromkeys(diagnoses)), "level": r.get("level"), "hints": r.get("hints", 0)})
    return sorted(out, key=lambda r: r["time"])


def hints_seen(root: Path) -> dict[str, int]:
    """How many hints of each exercise ``kvgrade hint`` has printed in this folder."""
    seen: dict[str, int] = {}
    for r in _records(root, HINTS):
        if _id(r.get("exercise")) and _count(r.get("hint")) and _time(r.get("time")):
            seen[r["exercise"]] = max(seen.get(r["exercise"], 0), r["hint"])
    return seen


def _records(root: Path, name: str) -> list[dict]:
    folder = Path(root) / LOG_DIR
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        data = plainfile.read_head(folder / name, MAX_LOG_BYTES)  # None: a FIFO or device planted as a log
    except OSError:
        return []
    if data is None:
        return []
    out = []
    for line in data.split(b"\n"):
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue
        if isinstance(record, dict):
            out.append(record)
    return out


def _stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def _time(value) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        when = datetime.fromisoformat(value)
        # in UTC from here on: a time within a day of year 1 or 9999 cannot be moved there (so it is no
        # time), and times in one zone compare and print without being moved again
        return when.astimezone(timezone.utc) if when.tzinfo else None
    except (ValueError, OverflowError):
        return None


def _id(value) -> bool:
    return isinstance(value, str) and 0 < len(value) <= MAX_ID and value.replace("_", "a").isalnum() and value.isascii()


def _count(value) -> bool:
    return type(value) is int and 0 <= value <= 100_000


# ---------------------------------------------------------------------------- the summary a report shows

def summarise(root: Path, result, when: datetime | None = None) -> dict | None:
    """The session as reports show it, or None when ``root`` is not a workspace.

    ``{"started", "minutes", "used_minutes", "kept_by", "exercises": {id: timeline}}``; each
    timeline holds its runs (minutes since the start, checks passed, total), the minutes to the
    first run with every check passed, each diagnosis's first and last run and when it went
    away, and hints the candidate printed for themselves.
    """
    workspace = read_workspace(root)
    if workspace is None:
        return None
    started, ids = workspace["started"], {e.id for e in result.exercises}
    by_exercise: dict[str, list[dict]] = {}
    for r in attempts(root):
        if r["exercise"] in ids and r["time"] >= started:
            by_exercise.setdefault(r["exercise"], []).append(r)
    seen = hints_seen(root)
    used = _minutes(started, when or now())
    return {"started": _stamp(started), "minutes": workspace["minutes"], "used_minutes": used, "kept_by": KEPT_BY,
            "exercises": {eid: runs_timeline(runs, started, seen.get(eid, 0)) for eid, runs in by_exercise.items()}}


def runs_timeline(runs: list[dict], started: datetime, hints: int) -> dict:
    points = [[_minutes(started, r["time"]), r["passed"], r["total"]] for r in runs]
    correct = next((p[0] for p in points if p[2] and p[1] == p[2]), None)
    met: dict[str, dict] = {}
    for i, r in enumerate(runs):
        for d in r["diagnoses"]:
            met.setdefault(d, {"id": d, "at": _clock(r["time"]), "fixed": None, "last": i})["last"] = i
    for d in met.values():
        after = d.pop("last") + 1
        d["fixed"] = _clock(runs[after]["time"]) if after < len(runs) else None
    return {"runs": len(runs), "points": points, "first_correct_minutes": correct,
            "diagnoses": list(met.values()), "hints_seen": hints}


def _minutes(start: datetime, when: datetime) -> float:
    return round(max(0.0, (when - start).total_seconds()) / 60, 1)


def _clock(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%H:%M")
