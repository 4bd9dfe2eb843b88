"""Interview mode in every report: hints used, the attempt timeline, the session's time box.

The timeline and the candidate's hint log come from the candidate's machine (see
grader/timeline.py): every line here says so, and none of it feeds a level. A saved result
may have been edited, so the numbers are read defensively.
"""
from __future__ import annotations

import shlex
from html import escape

from ..result import plural

SPARKS = "▁▂▃▄▅▆▇█"
CHART_W, CHART_H, PAD = 320, 90, 24


def hint_lines(e, candidate: bool = False, workspace: str | None = None) -> list[str]:
    """The hints recorded by the interviewer and those the candidate took (one wording each, with the
    hint numbers), and where the reader can run it, the offer of the next one.

    ``workspace``: the folder the reader runs ``kvgrade hint`` in (``hint_workspace``; "" when its name
    is not known), or None where they cannot run it (a live room, Gradescope, a result graded outside a
    workspace): then nothing is offered.
    """
    offered = _int(e.hints_offered)
    if not offered or e.status == "not_attempted":
        return []
    if candidate and not e.timeline:  # not graded in a workspace: the reader has no `kvgrade hint` to run
        return []
    given, seen = [h for h in e.hints_given if _int(h)], _int((e.timeline or {}).get("hints_seen"))
    out = []
    if given:  # the candidate's copy may hide levels: it says only what was recorded
        out.append(f"hints recorded by the interviewer: {_numbered(given)} ({len(given)} of {offered} staged)"
                   + ("" if candidate else "; they count toward the level"))
    if seen:  # `kvgrade hint` prints them in order: the first `seen`
        taken = _numbered(range(1, seen + 1)) if seen < 3 else f"hints 1 to {seen}"
        out.append(f"hints used: {seen} of {offered} ({taken}), taken with kvgrade hint "
                   "and kept in the candidate's own log: context, never a level")
    if not given and not seen:  # "0" only where a log could have shown one; else nothing is known either way
        out.append(f"hints used: 0 of {offered}" if e.timeline else
                   f"hints used: none recorded ({offered} staged; no workspace log, no hint in the notes)")
    left = offered - min(seen, offered)
    # nothing to be stuck on once every check passes, and nothing to offer once every hint was printed
    if workspace is not None and left and not all(c.passed for c in e.checks):
        command = f"kvgrade hint {e.id} {shlex.quote(workspace)}" if workspace else \
            f"kvgrade hint {e.id}, run in your workspace folder"
        out.append(f"stuck? {offered} staged hints, from a nudge to near the answer: {command}" if left == offered
                   else f"stuck? {plural(left, 'more staged hint')} (next: hint {seen + 1}): {command}")
    return out


def hint_workspace(result, e) -> str | None:
    """The workspace folder in which the reader of ``result`` can run ``kvgrade hint`` for ``e``, as the
    grading named it (``result.session["workspace"]``, recorded with the attempt log), or None where no
    hint is to be offered.

    Only a workspace made by ``kvgrade start`` keeps the candidate's attempt log (``e.timeline``), and only
    there does ``kvgrade hint`` work; a live grading (the room, ``grade --live``) is the interviewer's, who
    gives hints themselves. Detail feedback offers it too: detail is what ``kvgrade grade`` shows by default,
    and the one grading a workspace on their own machine is the candidate working in it. Student-facing
    Gradescope output never offers one (its renderer passes None): the autograder is not the workspace.
    """
    if result.live or not e.timeline or e.status == "not_attempted":
        return None
    where = (result.session or {}).get("workspace")
    return where if isinstance(where, str) else ""  # "": offered without a folder name (an older result)


def _numbered(numbers) -> str:
    """ "hint 2", "hints 1 and 2", "hints 1, 2 and 3"."""
    numbers = [str(n) for n in numbers]
    if len(numbers) == 1:
        return f"hint {numbers[0]}"
    return f"hints {', '.join(numbers[:-1])} and {numbers[-1]}"


def points(e) -> list[tuple[float, int, int]]:
    """(minutes since the start, checks passed, checks run) per logged run, malformed ones left out."""
    out = []
    for p in (e.timeline or {}).get("points", []):
        if isinstance(p, (list, tuple)) and len(p) == 3 and all(isinstance(x, (int, float)) for x in p):
            minutes, passed, total = float(p[0]), int(p[1]), int(p[2])
            if minutes >= 0 and 0 <= passed <= total:
                out.append((minutes, passed, total))
    return out


def timeline_lines(e) -> list[str]:
    """The timeline as text: a sparkline of checks passed per run, time to the first correct
    answer, the diagnoses met along the way, the number of runs."""
    runs = points(e)
    if not runs:
        return []
    t = e.timeline
    spark = "".join(SPARKS[round((len(SPARKS) - 1) * p / n) if n else 0] for _, p, n in runs)
    first = t.get("first_correct_minutes")
    ends = [f"{p}/{n} at {_min(m)}" for m, p, n in (runs[0], runs[-1])[:len(runs)]]  # one run: said once
    out = [f"timeline: {len(runs)} run{'s' if len(runs) != 1 else ''}, checks passed {spark} ({' -> '.join(ends)}); "
           + (f"first run passing every check after {_min(first)}" if isinstance(first, (int, float))
              else "no run passed every check")]
    met = diagnoses_met(e)
    if met:
        out.append("diagnoses along the way (UTC): " + "; ".join(met))
    return out


def diagnoses_met(e) -> list[str]:
    """ "top_left_alignment at 12:04, fixed at 12:09" (times UTC, as logged)."""
    out = []
    for d in (e.timeline or {}).get("diagnoses", []):
        if isinstance(d, dict) and isinstance(d.get("id"), str):
            fixed = f", fixed at {d['fixed']}" if isinstance(d.get("fixed"), str) else ", not fixed"
            out.append(f"{d['id']} at {d.get('at', '?')}{fixed}")
    return out


def session_lines(result) -> list[str]:
    s = result.session or {}
    if not s:
        return []
    used, box = s.get("used_minutes"), s.get("minutes")
    started = str(s.get("started", "?")).replace("T", " ").replace("+00:00", " UTC")
    line = f"started {started}"
    if isinstance(used, (int, float)):
        line += f", {_min(used)} used" + (f" of a {box} min time box" if isinstance(box, int) else "")
        if isinstance(box, int) and used > box:
            line += " (over the time box)"
    return [line, str(s.get("kept_by", ""))]


def timeline_svg(e) -> str:
    """Checks passed over time as a small inline SVG: one dot per run, a line through them."""
    runs = points(e)
    if not runs:
        return ""
    span = runs[-1][0] or 1.0
    times = [m for m, _, _ in runs]
    by_time = all(a < b for a, b in zip(times, times[1:]))  # runs logged in the same minute tenth: by order
    xs = [m / span for m in times] if by_time else [i / max(len(runs) - 1, 1) for i in range(len(runs))]
    xy = [(PAD + (CHART_W - PAD - 8) * x, 8 + (CHART_H - 8 - 18) * (1 - (p / n if n else 0)))
          for x, (m, p, n) in zip(xs, runs)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{"#2e7d32" if n and p == n else "#d9412b"}">'
                   f"<title>{escape(_min(m))}: {p}/{n} checks</title></circle>"
                   for (x, y), (m, p, n) in zip(xy, runs))
    base = CHART_H - 18
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" class="timeline" width="{CHART_W}" '
            f'height="{CHART_H}" viewBox="0 0 {CHART_W} {CHART_H}"><title>checks passed over time</title>'
            f'<line x1="{PAD}" y1="8" x2="{PAD}" y2="{base}" stroke="#999"/>'
            f'<line x1="{PAD}" y1="{base}" x2="{CHART_W - 8}" y2="{base}" stroke="#999"/>'
            f'<text x="2" y="14" font-size="10" fill="#555">all</text>'
            f'<text x="10" y="{base}" font-size="10" fill="#555">0</text>'
            f'<text x="{PAD}" y="{CHART_H - 4}" font-size="10" fill="#555">0 min</text>'
            f'<text x="{CHART_W - 8}" y="{CHART_H - 4}" font-size="10" fill="#555" text-anchor="end">'
            f'{escape(_min(span))}</text>'
            f'<polyline points="{line}" fill="none" stroke="#1f4e8c" stroke-width="2"/>{dots}</svg>')


def _min(minutes) -> str:
    return f"{float(minutes):g} min"


def _int(value) -> int:
    return value if type(value) is int and value > 0 else 0
