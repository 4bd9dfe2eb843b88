"""Markdown, for pasting into a hiring system or an issue (GitHub-flavoured tables and fences)."""
from __future__ import annotations

from ..result import ExerciseResult, Result
from . import interview, pictures
from .common import (CRITERION_MARKS, STATUS_WORDS, case_text, exercise_level, explanation, level_word,
                     overall_level, reproduce, shows_detail)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> list[str]:
    return ["> " + line if line else ">" for line in text.strip().splitlines()]


def render(result: Result) -> str:
    out = [f"# kvgrade report: `{result.submission}`", "",
           f"**Overall: {overall_level(result)}** · {result.score:.0%} of checks passed · "
           f"seed {result.seed} · feedback {result.feedback} · kvgrade {result.kvgrade_version} · "
           f"isolation {result.isolation}", "",
           *_session(result),
           "| exercise | level | checks passed | status |", "|---|---|---|---|"]
    for e in result.exercises:
        checks = f"{e.passed_checks}/{len(e.checks)}" if e.checks else "-"
        out.append(f"| `{e.id}` {_cell(e.title)} | **{exercise_level(e)}** | {checks} | "
                   f"{_cell(STATUS_WORDS[e.status])} |")
    for e in result.exercises:
        out += ["", *_exercise(result, e)]
    return "\n".join(out).rstrip() + "\n"


def _exercise(result: Result, e: ExerciseResult) -> list[str]:
    out = [f"## `{e.id}`: {e.title} ({exercise_level(e)})", ""]
    if e.status == "not_attempted" and not e.required:
        return out + [f"Not attempted ({e.error or 'no module found'}); not counted against the candidate."]
    if e.status == "not_attempted":
        return out + [f"Not attempted ({e.error or 'no module found'}); required by the interview set, so it counts as weak."]
    out += _explanation(e)
    out += _interview(e, candidate=not shows_detail(result))
    if e.error:
        out += [f"**Error:** {e.error}", ""]
    if e.diagnoses:
        out += ["**Diagnoses**", ""]
        for d in e.diagnoses:
            line = f"- `{d.id}` (caps at {level_word(d.caps)}): {d.message}"
            if d.explain and d.explain != d.message:
                line += f"  \n  *{d.explain}*"
            out.append(line)
        out.append("")
    shown = [c for c in e.criteria if c.text]  # a redacted observed criterion has none
    if shown:
        out += ["**Criteria**", ""]
        for c in shown:
            box = {"met": "[x]", "missed": "[ ]", "to_observe": "[?]"}[c.status]
            who = "observed" if c.kind == "observed" else "checks"
            out.append(f"- {box} *{level_word(c.level)}, {who}, {CRITERION_MARKS[c.status]}*: {c.text}")
        out.append("")
    failing = [c for c in e.checks if not c.passed]
    if failing:
        out += ["**Failing checks**", ""]
        for c in failing:
            out.append(f"- `{c.id}`: {c.description}")
            if c.message:
                out.append(f"  - what happened: {c.message}")
            if c.case:
                out.append(f"  - tried: {case_text(c.case)}")
            if shows_detail(result):
                out.append(f"  - reproduce: `{reproduce(result, e.id, c.id)}`")
            if c.picture:
                out += ["", "  ```text", *("  " + line for line in pictures.text(c.picture).splitlines()),
                        "  ```"]
        out.append("")
    passing = [c.id for c in e.checks if c.passed]
    if passing:
        out += ["**Passing checks:** " + ", ".join(f"`{c}`" for c in passing), ""]
    if e.notes:
        out += ["**Interviewer notes**", "", *_quote(e.notes), ""]
    out += _level_guide(e)
    if e.follow_ups:
        out += ["**Follow-up questions**", ""]
        for i, f in enumerate(e.follow_ups, 1):
            out.append(f"{i}. {f.get('ask', '')}  \n   *Listen for:* {f.get('listen_for', '')}")
        out.append("")
    return out


def _session(result: Result) -> list[str]:
    lines = interview.session_lines(result)
    return [f"*{_cell(line)}*  " for line in lines[:-1]] + [f"*{_cell(lines[-1])}*", ""] if lines else []


def _interview(e: ExerciseResult, candidate: bool) -> list[str]:
    """Hints used and the attempt timeline (one text line for the chart), when there are any."""
    lines = interview.hint_lines(e, candidate) + interview.timeline_lines(e)
    return [f"- {_cell(line)}" for line in lines] + [""] if lines else []


def _explanation(e: ExerciseResult) -> list[str]:
    lines = explanation(e)
    return [f"*{_cell(line)}*  " for line in lines[:-1]] + [f"*{_cell(lines[-1])}*", ""] if lines else []


def _level_guide(e: ExerciseResult) -> list[str]:
    """The rubric's summary and its words for each level, for the interviewer."""
    if not e.level_guide:
        return []
    out = ["**What each level looks like**", ""] + ([" ".join(e.about.split()), ""] if e.about else [])
    return out + [f"- *{level_word(level)}*: {_cell(words)}" for level, words in e.level_guide.items()] + [""]
