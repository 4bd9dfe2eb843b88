"""A short coloured summary for the terminal (click styling; plain when not a TTY)."""
from __future__ import annotations

import click

from ..result import Result

LEVEL_COLOURS = {"strong_hire": "green", "hire": "cyan", "weak": "red", None: "white"}
STATUS_WORDS = {"not_attempted": "not attempted", "error": "error", "graded": ""}


def level_text(level: str | None) -> str:
    return click.style((level or "-").replace("_", " "), fg=LEVEL_COLOURS.get(level, "white"), bold=True)


def summary(result: Result, detail: bool = True) -> str:
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
        for c in e.checks:
            if not c.passed:
                text = c.message if detail else c.description
                lines.append("      " + click.style("x ", fg="red") + f"{c.id}: {text}")
        todo = [c.id for c in e.criteria if c.status == "to_observe"]
        if todo and detail:
            lines.append(click.style(f"      to observe in conversation: {', '.join(todo)}", dim=True))
    lines += ["", f"  overall: {level_text(result.overall_level)}   "
              f"({result.seconds:.1f} s)"]
    return "\n".join(lines)
