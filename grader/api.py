"""kvgrade's public Python API: grade, batch, report. The ``kvgrade`` command line is a thin
layer over these functions (as otter-grader's commands are), and the live room, the platforms
and the tests call the same ones, so the API and the CLI cannot drift.

    from grader import api
    result = api.grade("submission/", ["decode_mask"], seed=7)   # a Result; candidate text made safe
    html = api.report(result, "html")                            # any of api.FORMATS
    rows = api.batch(["cohort/"], "out/")                          # many submissions, ranked
    saved = api.load("result.json")                               # a saved result, validated

Errors are exceptions a caller can show in one line: ``SubmissionError`` (a bad submission),
``IsolationError`` (no sandbox where one is required), ``NotesError``, ``ResultError`` (a file
that is not a saved result), ``WorkspaceError``; unknown exercise ids raise ``KeyError``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from . import engine, plainfile, timeline, workspace
from .engine import fresh_seed
from .notes import Notes, NotesError, apply as apply_notes, reread, template
from .render.formats import FORMATS, render, shown as _shown
from .result import Result, neutralized
from .sandbox import IsolationError, Limits, require_isolation
from .submission import SubmissionError
from .workspace import workspace_set

__all__ = ["FORMATS", "IsolationError", "Notes", "NotesError", "ResultError", "SubmissionError", "batch", "fresh_seed",
           "grade", "load", "notes_template", "record_notes", "report", "shown", "workspace_set"]


class ResultError(ValueError):
    """A file that is not a saved kvgrade result; ``str()`` names the first problem."""


def grade(submission: str | Path, exercises: list[str] | None = None, *, seed: int | None = None,
          notes: Notes | None = None, checks: set[str] | None = None, progress=None,
          warn: Callable[[str], None] | None = None, live: bool = False, **engine_options) -> Result:
    """Grade one submission folder or .zip.

    ``exercises``: the interview set (each required); None is self-study, where a workspace made
    by ``kvgrade start`` shows only its own exercises (never required: the candidate controls
    that record), and one exercise's folder of a workspace only that exercise. ``checks``: run only
    these check ids of the one exercise given. ``warn`` gets one line for each thing worth saying
    that is not an error. In a workspace (or one exercise's folder of it), the run is logged and the
    result carries the session's timeline. ``live``: the live room's run. ``engine_options`` go to
    ``engine.grade`` (``limits``, ``blame_reference``).
    """
    warn = warn or _quiet
    result = engine.grade(submission, exercises or None, seed=seed, notes=notes, only_checks=checks,
                          progress=progress, live=live, **engine_options)
    result.feedback = "detail"
    seen = workspace.exercises_shown(Path(submission))
    root = seen[0]
    note = None if checks else workspace.keep_shown(result, seen, exercises)
    if note:
        warn(note)
    if not checks and root is not None:
        _log_attempt(root, result, warn)
    for problem in notes.problems(result) if notes else []:
        warn(problem)
    return result


def batch(paths: list[str | Path], out_dir: str | Path = "kvgrade-batch", exercises: list[str] | None = None, *,
          seed: int | None = None, feedback: str = "detail", show_levels: bool = False, jobs: int | None = None,
          trust_submissions: bool = False, on_start=None, on_done=None, stop=None) -> list[dict]:
    """Grade many submissions in parallel into ``out_dir`` and rank them; returns the rows.

    Each path is a submission or a folder of them. Other people's code: ``IsolationError``
    unless a sandbox works here or ``trust_submissions``. ``batch.Interrupted`` once ``stop``
    (a threading.Event) is set; the same call again resumes. ``on_start(count, out_dir)`` once
    the submissions are found, ``on_done(row)`` as each one finishes.
    """
    from .batch import grade_many, holds_no_candidate, submissions

    found = submissions([str(p) for p in paths])
    if all(holds_no_candidate(p) for p in found):
        raise SubmissionError(f"no submission found in {', '.join(str(p) for p in paths)[:300]}: no exercise module, "
                              "subfolder or .zip")
    require_isolation(trust_submissions, Limits())
    if on_start is not None:
        on_start(len(found), out_dir)
    return grade_many(found, out_dir, exercises or None, seed=seed, feedback=feedback, show_levels=show_levels,
                      jobs=jobs, on_done=on_done, stop=stop)


def report(result: Result, fmt: str, *, notes: Notes | None = None, feedback: str | None = None,
           show_levels: bool = False) -> str:
    """``result`` rendered as ``fmt`` (one of FORMATS). ``notes`` are recorded first (see
    ``record_notes``). ``feedback="summary"`` is the candidate's copy; a result saved as summary
    stays summary; None is detail, but summary for a student-facing format (Gradescope)."""
    record_notes(result, notes)
    return render(result, fmt, _feedback(result, feedback), show_levels)


def shown(result: Result, feedback: str | None = None, show_levels: bool = False) -> Result:
    """The result as a reader of ``feedback`` may see it (the terminal summary renders this)."""
    return _shown(result, _feedback(result, feedback), show_levels)


def record_notes(result: Result, notes: Notes | None):
    """Record interviewer notes in ``result``: observed criteria, hints, and the levels they imply
    (from the rubric and the saved check results). Only a detailed result takes notes."""
    if notes is None:
        return
    if result.feedback == "summary":
        raise NotesError("this result was saved with --feedback summary; add notes to the detailed one")
    apply_notes(result, notes)


def notes_template(result: Result) -> str:
    """A notes file (TOML) to fill in for the graded exercises of ``result``."""
    return template(result)


def _feedback(result: Result, feedback: str | None) -> str | None:
    return "summary" if result.feedback == "summary" and feedback is None else feedback


RESULT_BYTES = 64 << 20  # a saved result: a whole batch's is a few MiB


def load(path: str | Path) -> Result:
    """A saved result (``--json``), validated; its candidate text made safe again."""
    try:  # a regular file under the cap, never a FIFO or a device: a result is anyone's to hand over
        data = plainfile.read_plain_file(path, RESULT_BYTES)
        return neutralized(reread(json.loads(data)))  # validated, levels re-derived
    except OSError as exc:
        raise ResultError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, KeyError, RecursionError, OverflowError) as exc:
        why = str(exc).removeprefix("not a kvgrade result: ")
        raise ResultError(f"{path} is not a kvgrade result: {why}") from None


def _quiet(line: str):
    pass


def _log_attempt(root: Path, result: Result, warn: Callable[[str], None]):
    """Log this run in the workspace, and give the result the session's timeline."""
    try:
        timeline.record_attempt(root, result)
    except timeline.LogError as exc:
        warn(f"attempt not logged: {exc}")
    session = timeline.summarise(root, result)
    if session is None:  # the workspace record went away mid-run
        return
    session = neutralized(session)  # the log lives on the candidate's machine: hostile data
    for e in result.exercises:
        e.timeline = session["exercises"].get(e.id, {})
    result.session = {k: v for k, v in session.items() if k != "exercises"}
    result.session["workspace"] = neutralized(str(root))  # where `kvgrade hint` runs, as this grading named it
