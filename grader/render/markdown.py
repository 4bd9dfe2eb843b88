"""Markdown, for pasting into a hiring system or an issue (GitHub-flavoured tables and fences).

Text never becomes markup: the kit's own is kept on one line with ``<``, brackets and a leading
``#`` escaped; text candidate code may have written (messages, errors) has every ASCII punctuation
character escaped (no raw HTML, emphasis, links or autolinks such as ``javascript:`` or ``www.``);
code spans and fences are made longer than any backtick run inside them.
"""
from __future__ import annotations

import re

from ..result import ExerciseResult, Result
from . import interview, pictures
from .common import (CRITERION_MARKS, REPLAY_NOTE, STATUS_WORDS, caveats, exercise_level, explanation, failure_parts,
                     level_phrase, level_word, levels_shown, overall_level, own_tests_text, replay, report_link,
                     run_notes, shows_detail, status_text)


def text(value) -> str:
    """Plain text on one line that Markdown shows as written (no HTML, links, headings, tables)."""
    one_line = " ".join(str(value).split())
    return re.sub(r"^#", r"\\#", re.sub(r"([\\<\[\]|])", r"\\\1", one_line))


def untrusted(value) -> str:
    """Text the candidate's code may have written (a check's message, an error), on one line with each
    character that can start markup backslash-escaped (CommonMark shows it as itself): no emphasis,
    code, HTML, link, heading or table cell, and no GFM autolink (``https\\:``, ``a\\@b``, ``www\\.``)."""
    escaped = re.sub(r"([\\`*_~<>\[\]|#:!@])", r"\\\1", " ".join(str(value).split()))
    return re.sub(r"(?i)(www)\.", r"\1\\.", escaped)


def code(value) -> str:
    """An inline code span holding ``value`` verbatim, whatever backticks it contains."""
    value = " ".join(str(value).split())
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def fenced(body: str, indent: str = "") -> list[str]:
    fence = "`" * max(3, max((len(run) for run in re.findall(r"`+", body)), default=0) + 1)
    return [f"{indent}{fence}text", *(indent + line for line in body.splitlines()), f"{indent}{fence}"]


def _quote(value: str) -> list[str]:
    return ["> " + text(line) if line.strip() else ">" for line in value.strip().splitlines()]


def render(result: Result) -> str:
    shown = levels_shown(result)
    overall = f"**Overall: {overall_level(result)}** ({text(result.overall_reason)}) · " if shown else ""
    out = [f"# kvgrade report: {code(result.label)}", "",
           f"{overall}{result.score:.0%} of checks passed · "
           f"seed {result.seed} · feedback {result.feedback} · kvgrade {text(result.kvgrade_version)} · "
           f"isolation {text(result.isolation)}", ""]
    if result.isolation == "process":
        out += ["**Not isolated: grade only code you trust.**", ""]
    out += [f"> **{text(line)}**  " for line in caveats(result)] + ([""] if result.caveats else [])
    out += [f"{text(line)}  " for line in run_notes(result)] + ([""] if run_notes(result) else [])
    out += _session(result)
    columns = ["exercise", *(["level"] if shown else []), "checks passed", "status"]
    out += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for e in result.exercises:
        checks = f"{e.passed_checks}/{len(e.checks)}" if e.checks else "-"
        level = [f"**{exercise_level(e)}**"] if shown else []
        cells = [f"{code(e.id)} {text(e.title)}", *level, checks, text(status_text(e, shown))]
        out.append("| " + " | ".join(cells) + " |")
    for e in result.exercises:
        out += ["", *_exercise(result, e, shown)]
    return "\n".join(out).rstrip() + "\n"


def _exercise(result: Result, e: ExerciseResult, shown: bool) -> list[str]:
    out = [f"## {code(e.id)}: {text(e.title)}" + (f" ({exercise_level(e)})" if shown else ""), ""]
    if e.status == "not_attempted" and not e.required:
        return out + [f"Not attempted ({untrusted(e.error or 'no module found')})."]
    if e.status == "not_attempted":
        return out + [f"Not attempted ({untrusted(e.error or 'no module found')}); required by the interview set, "
                      f"so it counts" + (" as weak." if shown else ".")]
    if shown:
        out += _explanation(e)
    out += _interview(result, e)
    if e.error:
        out += [f"**Error:** {untrusted(e.error)}", ""]
    if e.diagnoses:
        out += ["**Diagnoses**", ""]
        for d in e.diagnoses:
            caps = f" (caps at {level_word(d.caps)})" if shown else ""
            line = f"- {code(d.id)}{caps}: {untrusted(d.message)}"
            if d.explain and d.explain != d.message:
                line += f"  \n  *{text(d.explain)}*"
            out.append(line)
        out.append("")
    out += _own_tests(result, e)
    if shown:
        out += _criteria(e)
    out += _failing(result, e)
    passing = [c.id for c in e.checks if c.passed]
    if passing:
        out += ["**Passing checks:** " + ", ".join(code(c) for c in passing), ""]
    if e.notes:
        out += ["**Interviewer notes**", "", *_quote(e.notes), ""]
    if shown:
        out += _level_guide(e)
    if e.follow_ups:
        out += ["**Follow-up questions**", ""]
        for i, f in enumerate(e.follow_ups, 1):
            out.append(f"{i}. {text(f.get('ask', ''))}  \n   *Listen for:* {text(f.get('listen_for', ''))}")
        out.append("")
    return out


def _session(result: Result) -> list[str]:
    lines = interview.session_lines(result)
    return [f"*{text(line)}*  " for line in lines[:-1]] + [f"*{text(lines[-1])}*", ""] if lines else []


def _interview(result: Result, e: ExerciseResult) -> list[str]:
    """Hints used and the attempt timeline (one text line for the chart), when there are any."""
    lines = interview.hint_lines(e, not shows_detail(result), interview.hint_workspace(result, e)) + \
        interview.timeline_lines(e)
    return [f"- {text(line)}" for line in lines] + [""] if lines else []


def _explanation(e: ExerciseResult) -> list[str]:
    lines = explanation(e)
    return [f"*{text(line)}*  " for line in lines[:-1]] + [f"*{text(lines[-1])}*", ""] if lines else []


def _level_guide(e: ExerciseResult) -> list[str]:
    """The rubric's summary and its words for each level, for the interviewer."""
    if not e.level_guide:
        return []
    out = ["**What each level looks like**", ""] + ([text(e.about), ""] if e.about else [])
    return out + [f"- *{level_word(level)}*: {text(words)}" for level, words in e.level_guide.items()] + [""]


def _own_tests(result: Result, e: ExerciseResult) -> list[str]:
    """The own-tests line (detail feedback only: it names the candidate's tests), and the note
    that the child's output was cut."""
    line = own_tests_text(e.own_tests) if shows_detail(result) else ""
    return ([f"**{text(line[0].upper() + line[1:])}**", ""] if line else []) + \
        ([f"*{untrusted(e.output_note)}*", ""] if e.output_note else [])


def _criteria(e: ExerciseResult) -> list[str]:
    shown = [c for c in e.criteria if c.text]  # a redacted observed criterion has none
    if not shown:
        return []
    out = ["**Criteria**", ""]
    for c in shown:
        box = {"met": "[x]", "missed": "[ ]", "to_observe": "[?]"}[c.status]
        who = "observed" if c.kind == "observed" else "checks"
        out.append(f"- {box} *{level_word(c.level)}, {who}, {CRITERION_MARKS[c.status]}*: {text(c.text)}")
    return out + [""]


def _failing(result: Result, e: ExerciseResult) -> list[str]:
    failing = [c for c in e.checks if not c.passed]
    if not failing:
        return []
    out = ["**Failing checks**", ""]
    for c in failing:
        out.append(f"- {code(c.id)}: {text(c.description)}")
        for label, value in failure_parts(result, e.id, c):
            out.append(f"  - {label}: {code(value) if label == 'reproduce' else untrusted(value)}")
        if c.picture:
            out += ["", *fenced(pictures.text(c.picture), indent="  ")]
    if replay(result, e):
        out += ["", f"*{text(REPLAY_NOTE)}:* {code(replay(result, e))}"]
    return out + [""]


def batch_summary(rows: list[dict], exercise_ids: list[str], seed: int) -> str:
    """The ranking of a batch as one Markdown table, each row linking to its report."""
    head = ["rank", "candidate", "overall", *exercise_ids, "checks passed", "report", "why this level"]
    lines = [f"# kvgrade batch ({len(rows)} submissions, seed {seed})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        per = [_batch_cell(r["exercises"].get(e)) for e in exercise_ids]
        overall = (f"broken: {untrusted(r['error'])}" if r["error"] else
                   f"**{level_phrase(r['level'], r.get('provisional'), range(r.get('to_observe', 0)))}**")
        report = f"[report]({report_link(r)})" if report_link(r) else "-"
        lines.append("| " + " | ".join([str(r["rank"]), code(r["name"]), overall, *per, f"{r['score']:.0%}",
                                         report, text(r.get("reason") or "-")]) + " |")
    return "\n".join(lines) + "\n"


def _batch_cell(entry: dict | None) -> str:
    if entry is None:
        return "-"
    if entry["status"] == "not_attempted":
        return STATUS_WORDS["not_attempted"] + (" (weak: required)" if entry.get("required") else "")
    return level_word(entry["level"]) + (" (error)" if entry["status"] == "error" else "")
