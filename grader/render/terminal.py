"""A short coloured summary for the terminal (click styling; plain when not a TTY)."""
from __future__ import annotations

import click

from ..result import Result
from . import interview, pictures
from .common import (NOT_ISOLATED, REPLAY_NOTE, STATUS_WORDS, caveats, explanation, failure_parts, level_phrase,
                     levels_shown, named_ids, named_sentences, own_tests_text, replay, run_notes, status_text,
                     what_differs)

LEVEL_COLOURS = {"strong_hire": "green", "hire": "cyan", "weak": "red", None: "white"}


def level_text(level: str | None, provisional: bool = False, to_observe=()) -> str:
    words = level_phrase(level, provisional, to_observe) if level else "-"
    return click.style(words, fg=LEVEL_COLOURS.get(level, "white"), bold=True)


def header(result: Result) -> list[str]:
    lines = [f"kvgrade {result.kvgrade_version} - {result.label} (seed {result.seed}, "
             f"isolation: {result.isolation})"]
    if result.isolation == "process":
        lines.append(click.style(NOT_ISOLATED, fg="yellow", bold=True))
    lines += [click.style(line, fg="red", bold=True) for line in caveats(result)]
    return lines + [click.style(line, dim=True) for line in run_notes(result)] + [""]


def summary(result: Result, detail: bool | None = None, saved: bool = False) -> str:
    """The verdict per exercise; with detail, failures with their case, a reproduce line and
    the first picture of each exercise drawn in characters. ``saved``: a re-render, so the
    grading time is said to be the saved run's."""
    detail = result.feedback != "summary" if detail is None else detail
    took = f"({'saved result, graded in ' if saved else ''}{result.seconds:.1f} s)"
    shown = levels_shown(result)
    lines = header(result)
    width = max((len(e.id) for e in result.exercises), default=10)
    for e in result.exercises:
        head = f"  {e.id:<{width}}" + (f"  {level_text(e.level, e.provisional, e.to_observe):<20}" if shown else "")
        if e.status == "graded":
            head += f"  {e.passed_checks}/{len(e.checks)} checks"
        else:
            head += f"  {status_text(e, shown)}" + (f": {e.error}" if e.error and e.status == "error" else "")
        lines.append(head)
        if shown:
            lines += [click.style("      " + line, dim=True) for line in explanation(e)]
        session = interview.hint_lines(e, not detail, interview.hint_workspace(result, e)) + interview.timeline_lines(e)
        lines += ["      " + line for line in session]
        lines += _exercise_lines(result, e, detail)
    if shown:
        overall = level_text(result.overall_level, result.overall_provisional, result.overall_to_observe)
        lines += ["", f"  overall: {overall}   {took}"]
        if len(result.exercises) > 1:  # with one exercise its own lines above already say why
            lines.append(click.style(f"    {result.overall_reason}", dim=True))
    else:
        lines += ["", f"  {result.score:.0%} of checks passed   {took}"]
    lines += ["  " + line for line in interview.session_lines(result)]
    return "\n".join(lines)


def _exercise_lines(result: Result, e, detail: bool) -> list[str]:
    lines = ["      " + click.style(f"[{d.id}] ", fg="yellow") + d.message for d in e.diagnoses]
    if e.output_note:
        lines.append("      " + e.output_note)
    if detail and e.own_tests:  # detail only: it names the candidate's tests
        lines.append("      " + own_tests_text(e.own_tests))
    drawn = _picture_to_draw(e.checks) if detail else None
    for c in e.checks:
        if c.passed:
            continue
        lines.append("      " + click.style("x ", fg="red") + f"{c.id}: " + (_differs(c) if detail else c.description))
        if detail:
            lines += [click.style(f"        rerun: {value}", dim=True)
                      for label, value in failure_parts(result, e.id, c) if label == "reproduce"]
        if c is drawn:
            lines += ["        " + line for line in pictures.text(c.picture).splitlines()]
    if detail and replay(result, e):
        lines += [click.style(f"      {REPLAY_NOTE}:", dim=True), click.style(f"        {replay(result, e)}", dim=True)]
    if e.notes:
        lines.append("      notes: " + " ".join(e.notes.split()))
    return lines


def _differs(check) -> str:
    """What differs, then the ids of the mistakes it fits (their sentences are said once, above)."""
    named = named_ids(check)
    return (what_differs(check) if check.message else check.description) + \
        (click.style(f"  [{', '.join(named)}]", fg="yellow") if named else "")


def single_check(result: Result, check_id: str) -> str:
    """A rerun of one check: that check's outcome, never a level (one check is not a verdict)."""
    lines = header(result)
    for e in result.exercises:
        for c in e.checks:
            mark = click.style("passed" if c.passed else "failed", fg="green" if c.passed else "red", bold=True)
            lines.append(f"  {e.id} / {c.id}: {mark}")
            if not c.passed:
                lines += [f"      {label}: {value}" for label, value in failure_parts(result, e.id, c)]
                # no diagnoses block here: each mistake the check's tag names is said once, below it
                lines += [f"      [{d}] {sentence}" for d, sentence in named_sentences(c).items()]
                if c.picture and result.feedback != "summary":
                    lines += ["        " + line for line in pictures.text(c.picture).splitlines()]
        if not e.checks:
            lines.append(f"  {e.id} / {check_id}: not run ({STATUS_WORDS[e.status]}"
                         + (f": {e.error})" if e.error else ")"))
    return "\n".join(lines)


def _picture_to_draw(checks):
    """One picture per exercise: the smallest failing case with more than one row, if any."""
    drawn = [c for c in checks if not c.passed and c.picture]
    key = lambda c: (c.picture["shape"][0] < 2, c.picture["shape"][0] * c.picture["shape"][1])  # noqa: E731
    return min(drawn, key=key) if drawn else None
