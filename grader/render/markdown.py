"""Markdown, for pasting into a hiring system or an issue (GitHub-flavoured tables and fences)."""
from __future__ import annotations

from ..result import ExerciseResult, Result
from . import pictures
from .common import (CRITERION_MARKS, STATUS_WORDS, case_text, level_word, own_tests_text, reproduce,
                     shows_detail)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _quote(text: str) -> list[str]:
    return ["> " + line if line else ">" for line in text.strip().splitlines()]


def render(result: Result) -> str:
    out = [f"# kvgrade report: `{result.submission}`", "",
           f"**Overall: {level_word(result.overall_level)}** · {result.score:.0%} of checks passed · "
           f"seed {result.seed} · feedback {result.feedback} · kvgrade {result.kvgrade_version} · "
           f"isolation {result.isolation}", "",
           "| exercise | level | checks passed | status |", "|---|---|---|---|"]
    for e in result.exercises:
        checks = f"{e.passed_checks}/{len(e.checks)}" if e.checks else "-"
        out.append(f"| `{e.id}` {_cell(e.title)} | **{level_word(e.level)}** | {checks} | "
                   f"{_cell(STATUS_WORDS[e.status])} |")
    for e in result.exercises:
        out += ["", *_exercise(result, e)]
    return "\n".join(out).rstrip() + "\n"


def _own_tests(e: ExerciseResult) -> list[str]:
    text = own_tests_text(e.own_tests)
    return [f"**{_cell(text[0].upper() + text[1:])}**", ""] if text else []


def _exercise(result: Result, e: ExerciseResult) -> list[str]:
    out = [f"## `{e.id}`: {e.title} ({level_word(e.level)})", ""]
    if e.status == "not_attempted":
        return out + [f"Not attempted ({e.error or 'no module found'}); not counted against the candidate."]
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
    out += _own_tests(e)
    if e.criteria:
        out += ["**Criteria**", ""]
        for c in e.criteria:
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
    if e.follow_ups:
        out += ["**Follow-up questions**", ""]
        for i, f in enumerate(e.follow_ups, 1):
            out.append(f"{i}. {f.get('ask', '')}  \n   *Listen for:* {f.get('listen_for', '')}")
        out.append("")
    return out
