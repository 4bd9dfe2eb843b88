"""What every renderer shares: words for levels and statuses, the failure block, reproduce
lines and candidate-safe redaction. Candidate-derived text is neutralised where a result is
made (``result.neutralized``), before any renderer.

Nothing here decides a verdict: levels, statuses and diagnoses come from the ``Result``.
"""
from __future__ import annotations

import copy
import re
import shlex

from .. import catalog
from ..own_tests import CHECK_PREFIX as OWN_TESTS_PREFIX
from ..result import Result, plural
from ..sandbox.isolation import NOT_ISOLATED  # noqa: F401 (re-exported: the renderers take it from here)
from . import pictures

LEVEL_WORDS = {"strong_hire": "strong hire", "hire": "hire", "weak": "weak", None: "no level"}
STATUS_WORDS = {"graded": "graded", "not_attempted": "not attempted", "error": "error"}
CRITERION_MARKS = {"met": "met", "missed": "missed", "to_observe": "to observe"}



def run_notes(result: Result) -> list[str]:
    """Plain lines every report header carries: live grading, the bounds that held, and links never followed."""
    lines = [LIVE_NOTE] if result.live else []
    if result.bounds:
        b = result.bounds
        lines.append(f"bounds: memory {b.get('memory')}, processes {b.get('pids')}, scratch {b.get('scratch')}, "
                     f"root {b.get('root')}, network {b.get('network')}")
    if result.skipped_links:
        shown = ", ".join(result.skipped_links[:5])
        more = f" and {len(result.skipped_links) - 5} more" if len(result.skipped_links) > 5 else ""
        lines.append(f"links in the submission, never followed: {shown}{more}")
    return lines


LIVE_NOTE = "graded live: validation beyond the prompt's cases is for the interviewer to observe, not a cap"


def caveats(result: Result) -> list[str]:
    """What every report says first, in its strongest style: levels re-derived against the file,
    a rubric that changed since (see ``notes.reread``)."""
    return [f"caution: {line}" for line in result.caveats]


def level_word(level: str | None) -> str:
    return LEVEL_WORDS.get(level, str(level))


def status_text(e, levels: bool = True) -> str:
    """An exercise's status in words; not attempted says whether it still counts (and, when
    levels are shown, as what)."""
    if e.status == "not_attempted" and e.required:
        return "not attempted (required: counts as weak)" if levels else "not attempted (required)"
    return STATUS_WORDS[e.status]


def level_phrase(level: str | None, provisional: bool = False, to_observe=()) -> str:
    """A level as every format says it: "strong hire (provisional: 3 observations)"."""
    if not provisional:
        return level_word(level)
    n = len(to_observe)
    return f"{level_word(level)} (provisional: {n} observation{'' if n == 1 else 's'})"


def exercise_level(e) -> str:
    return level_phrase(e.level, e.provisional, e.to_observe)


def overall_level(result: Result) -> str:
    return level_phrase(result.overall_level, result.overall_provisional, result.overall_to_observe)


def explanation(e) -> list[str]:
    """Why the level is what it is, what would raise it, and substance apart from hygiene: one
    line each, empty ones left out."""
    return [line for line in (e.reason, e.to_raise, e.hygiene if e.status == "graded" else "") if line]


def reproduce(result: Result, exercise_id: str, check_id: str) -> str:
    """One command that re-runs a single check on the same submission with the same seed."""
    return (f"kvgrade grade {shlex.quote(result.submission)} -e {exercise_id} --seed {result.seed} "
            f"--check {check_id} --feedback detail")


_REPORT_LINK = re.compile(r"[A-Za-z0-9._-]+/report\.html")


def report_link(row: dict) -> str | None:
    """A batch row's link to its report, only when it is the relative path batch writes
    (``name/report.html``): a row read back from a manifest on disk is data, not a URL to trust."""
    link = row.get("report")
    return link if isinstance(link, str) and _REPORT_LINK.fullmatch(link) else None


REPLAY_NOTE = ("each rerun line runs its check alone, but the full run called this module for every check before "
               "it, in one process: a module that keeps state across calls may answer differently alone. "
               "This line replays those calls in the same order")


def replay(result: Result, e) -> str:
    """One command that reruns every check of ``e`` up to its last failing one, in the full run's
    order and in one process (the candidate's own-test checks run elsewhere and are left out), so
    a module that keeps state across calls meets the same calls; empty when a rerun line is
    already that (its check ran first), or with summary feedback."""
    ran = [c for c in e.checks if not c.id.startswith(OWN_TESTS_PREFIX)]
    last = max((i for i, c in enumerate(ran) if not c.passed), default=0)
    if not shows_detail(result) or last == 0:
        return ""
    checks = " ".join(f"--check {c.id}" for c in ran[:last + 1])
    return f"kvgrade grade {shlex.quote(result.submission)} -e {e.id} --seed {result.seed} {checks} --feedback detail"


def what_differs(check) -> str:
    """A failing check's message without the diagnosis sentences it named, which a report that
    says each diagnosis once (where it is named) would otherwise repeat under every check."""
    text = check.message
    for _, sentence in check.named:
        text = text.replace(f"; {sentence}", "").replace(sentence, "")
    return text.strip(" ;") or check.message


def named_ids(check) -> list[str]:
    """The ids of the diagnoses a failing check named, each once, in the order named."""
    return list(named_sentences(check))


def named_sentences(check) -> dict[str, str]:
    """Each diagnosis a failing check named, with the first sentence it gave, in the order named."""
    first: dict[str, str] = {}
    for d, sentence in check.named:
        first.setdefault(d, sentence)
    return first


def what_happened(check) -> str:
    """A failing check's "what happened" in every format, by the terminal's rule: what differs, then
    the ids of the mistakes it fits as a tag (``... expected True)  [top_left_alignment]``). Each
    diagnosis's sentence is said once, where the report lists its diagnoses, never again per check."""
    if not check.message:
        return ""
    tag = named_ids(check)
    return what_differs(check) + (f"  [{', '.join(tag)}]" if tag else "")


def case_text(case: dict | None) -> str:
    return ", ".join(f"{k} = {v}" for k, v in (case or {}).items())


def own_tests_text(own_tests: dict | None) -> str:
    """One line on the candidate's own tests: their mutation score and what they missed."""
    if not own_tests:
        return ""
    caught, missed = len(own_tests.get("caught", [])), own_tests.get("missed", [])
    score = own_tests.get("score", 0)
    text = f"own tests: caught {caught} of {caught + len(missed)} known mistakes ({score:.0%})"
    if missed:
        text += "; missed: " + ", ".join(missed)
    if own_tests.get("set_aside"):
        text += f"; {plural(len(own_tests['set_aside']), 'test')} set aside as disagreeing with the contract"
    return text


def shows_detail(result: Result) -> bool:
    return result.feedback != "summary"


def failure_parts(result: Result, exercise_id: str, check) -> list[tuple[str, str]]:
    """What every renderer shows of a failing check, as (label, text) after its description.

    Detail only carries what summary feedback left in the check (``for_candidate`` empties it),
    plus the reproduce line; the picture is drawn by each renderer its own way.
    """
    parts = [("what happened", what_happened(check)), ("tried", case_text(check.case))]
    if shows_detail(result):
        parts.append(("reproduce", reproduce(result, exercise_id, check.id)))
    return [(label, text) for label, text in parts if text]


def failure_lines(result: Result, exercise_id: str, check) -> list[str]:
    """The failure block as plain text (JUnit, Gradescope)."""
    lines = [check.description, *(f"{label}: {text}" for label, text in failure_parts(result, exercise_id, check))]
    if check.picture:
        lines += ["", pictures.text(check.picture)]
    return lines


def levels_shown(result: Result) -> bool:
    """Summary feedback hides levels unless the interviewer chose to show them (--show-levels)."""
    return not result.levels_hidden


def for_candidate(result: Result, show_levels: bool = False) -> Result:
    """A copy safe to hand to a candidate: which checks passed and what each tries, nothing more.

    Hidden inputs live in failure messages, cases, pictures, errors and the concrete sentences
    of diagnoses; those go. A diagnosis keeps its id and the rubric's general explanation. The
    interviewer's side (what observed criteria listen for, notes, follow-up questions, the
    rubric's summary and level guide) goes too, and so does the own-tests line (it names tests
    from what the candidate's test process reported). Levels go unless ``show_levels``, and with them
    everything that speaks of a level (criteria, provisional, why, what would raise it,
    hygiene); when they are shown, that observations are pending stays, so a provisional level
    still says so.
    """
    safe = copy.deepcopy(result)
    safe.feedback = "summary"
    safe.levels_hidden = not show_levels
    for e in safe.exercises:
        for c in e.checks:
            c.message, c.case, c.picture, c.named = "", None, None, []
        rubric = _rubric_of(e.id)  # read once an exercise: each lookup parses its TOML again
        for d in e.diagnoses:
            d.message = _explanation_for_candidate(rubric, d)
        if e.error:
            e.error = _error_kind(e.error)
        e.follow_ups, e.notes, e.about, e.level_guide = [], "", "", {}
        e.own_tests = None  # names the candidate's tests as their run reported them: detail only
        e.interviewer = {}  # the sheet holds the hints' texts and what they cost
        if show_levels:
            for c in e.criteria:  # what an interviewer listens for stays theirs; that it is pending does not
                if c.kind == "observed":
                    c.text = ""
        else:
            e.criteria, e.level, e.provisional, e.to_observe = [], None, False, []
            e.reason, e.to_raise, e.hygiene = "", "", ""
            for d in e.diagnoses:
                d.caps = None
    return safe


def _rubric_of(exercise_id: str):
    """The kit's rubric of an exercise, or None for one this kit does not know."""
    try:
        return catalog.get(exercise_id).rubric
    except KeyError:
        return None


def _explanation_for_candidate(rubric, d) -> str:
    """The rubric's general explanation of a diagnosis, unless it states the rule being tested (its formula:
    a student who may submit again would be handed the fix); then the mistake's name alone. Without a rubric
    there is nothing to tell what gives the rule away: the name alone."""
    name = d.id.replace("_", " ")
    if rubric is None:
        return name
    return d.explain if d.explain and not rubric.states_rule(d.explain) else f"{name} (a classic mistake)"


def _error_kind(error: str) -> str:
    """An error's first words up to its colon (``SyntaxError``, ``import failed``), never its
    detail, which can quote a file the submission pointed at."""
    head = error.split(":", 1)[0].strip()
    return head if len(head) <= 60 else "the module could not be graded"
