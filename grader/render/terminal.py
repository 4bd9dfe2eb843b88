"""A short coloured summary for the terminal (click styling; plain when not a TTY)."""
from __future__ import annotations

import click

from ..result import Result
from . import interview, pictures
from .common import explanation, level_phrase, reproduce, shows_detail

LEVEL_COLOURS = {"strong_hire": "green", "hire": "cyan", "weak": "red", None: "white"}
STATUS_WORDS = {"not_attempted": "not attempted (not counted)", "error": "error", "graded": ""}


def level_text(level: str | None, provisional: bool = False, to_observe=()) -> str:
    words = level_phrase(level, provisional, to_observe) if level else "-"
    return click.style(words, fg=LEVEL_COLOURS.get(level, "white"), bold=True)


def summary(result: Result, detail: bool | None = None) -> str:
    """The verdict per exercise; with detail, failures with their case, a reproduce line and
    the first picture of each exercise drawn in characters."""
    detail = shows_detail(result) if detail is None else detail
    lines = [f"kvgrade {result.kvgrade_version} - {result.submission} (seed {result.seed}, "
             f"isolation: {result.isolation})", ""]
    width = max((len(e.id) for e in result.exercises), default=10)
    for e in result.exercises:
        head = f"  {e.id:<{width}}  {level_text(e.level, e.provisional, e.to_observe):<20}"
        if e.status == "graded":
            head += f"  {e.passed_checks}/{len(e.checks)} checks"
        else:
            head += f"  {STATUS_WORDS[e.status]}" + (f": {e.error}" if e.error and e.status == "error" else "")
        lines.append(head)
        lines += [click.style("      " + line, dim=True) for line in explanation(e)]
        lines += ["      " + line for line in interview.hint_lines(e, candidate=not detail) + interview.timeline_lines(e)]
        for d in e.diagnoses:
            lines.append("      " + click.style(f"[{d.id}] ", fg="yellow") + d.message)
        drawn = _picture_to_draw(e.checks) if detail else None
        for c in e.checks:
            if c.passed:
                continue
            text = (c.message or c.description) if detail else c.description
            lines.append("      " + click.style("x ", fg="red") + f"{c.id}: {text}")
            if detail:
                lines.append(click.style(f"        rerun: {reproduce(result, e.id, c.id)}", dim=True))
            if c is drawn:
                lines += ["        " + line for line in pictures.text(c.picture).splitlines()]
        if e.notes:
            lines.append("      notes: " + " ".join(e.notes.split()))
    overall = level_text(result.overall_level, result.overall_provisional, result.overall_to_observe)
    lines += ["", f"  overall: {overall}   "
              f"({result.seconds:.1f} s)"]
    lines += ["  " + line for line in interview.session_lines(result)]
    return "\n".join(lines)


def _picture_to_draw(checks):
    """One picture per exercise: the smallest failing case with more than one row, if any."""
    drawn = [c for c in checks if not c.passed and c.picture]
    key = lambda c: (c.picture["shape"][0] < 2, c.picture["shape"][0] * c.picture["shape"][1])  # noqa: E731
    return min(drawn, key=key) if drawn else None
