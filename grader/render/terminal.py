"""A short coloured summary for the terminal (click styling; plain when not a TTY)."""
from __future__ import annotations

import click

from ..result import Result
from . import pictures
from .common import own_tests_text, reproduce, shows_detail

LEVEL_COLOURS = {"strong_hire": "green", "hire": "cyan", "weak": "red", None: "white"}
STATUS_WORDS = {"not_attempted": "not attempted (not counted)", "error": "error", "graded": ""}


def level_text(level: str | None) -> str:
    return click.style((level or "-").replace("_", " "), fg=LEVEL_COLOURS.get(level, "white"), bold=True)


def summary(result: Result, detail: bool | None = None) -> str:
    """The verdict per exercise; with detail, failures with their case, a reproduce line and
    the first picture of each exercise drawn in characters."""
    detail = shows_detail(result) if detail is None else detail
    lines = [f"kvgrade {result.kvgrade_version} - {result.submission} (seed {result.seed}, "
             f"isolation: {result.isolation})", ""]
    width = max((len(e.id) for e in result.exercises), default=10)
    for e in result.exercises:
        head = f"  {e.id:<{width}}  {level_text(e.level):<20}"
        if e.status == "graded":
            head += f"  {e.passed_checks}/{len(e.checks)} checks"
        else:
            head += f"  {STATUS_WORDS[e.status]}" + (f": {e.error}" if e.error and e.status == "error" else "")
        lines.append(head)
        for d in e.diagnoses:
            lines.append("      " + click.style(f"[{d.id}] ", fg="yellow") + d.message)
        lines += _own_tests_lines(e)
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
        todo = [c.id for c in e.criteria if c.status == "to_observe"]
        if todo and detail:
            lines.append(click.style(f"      to observe in conversation: {', '.join(todo)}", dim=True))
    lines += ["", f"  overall: {level_text(result.overall_level)}   "
              f"({result.seconds:.1f} s)"]
    return "\n".join(lines)


def _own_tests_lines(e) -> list[str]:
    text = own_tests_text(e.own_tests)
    return ["      " + text] if text else []


def _picture_to_draw(checks):
    """One picture per exercise: the smallest failing case with more than one row, if any."""
    drawn = [c for c in checks if not c.passed and c.picture]
    key = lambda c: (c.picture["shape"][0] < 2, c.picture["shape"][0] * c.picture["shape"][1])  # noqa: E731
    return min(drawn, key=key) if drawn else None
