"""The result of one grading run: one model that every renderer reads and none recomputes.

``Result.to_dict()`` is the contract JSON (schema ``kvgrade.result/1``) plus extra fields;
``Result.from_dict()`` reads it back, so reports can be re-rendered from a saved file.

Plain data only: every field that can hold what candidate code produced (messages, cases,
pictures, errors, notes, paths, logs) is made plain as it is assigned (``_Plain``), whatever
was assigned: numpy scalars and arrays, NaN, huge or nested values, control characters. So
no renderer meets anything but bounded JSON-safe data, and none needs its own guard.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

SCHEMA = "kvgrade.result/1"
LEVELS = ("weak", "hire", "strong_hire")

# What a failing check showed, tagged where the failure happens; the level follows the kind,
# never the check it happened in (see rubrics/README.md for the calibration).
FAILURE_CAPS = {
    "wrong": "weak",       # a wrong value on an input the prompt allows
    "nan": "weak",         # NaN or inf where a number was due
    "crash": "weak",       # the candidate's code raised, hung, died or sent back unusable data
    "corrupt": "weak",     # state left wrong (a cache holding the wrong tokens)
    "must_not": "weak",    # a must-not of the contract (T x S allocation, loading skipped tiles, ...)
    "tests": "hire",       # the candidate's own tests are weaker than the rubric asks
    "efficiency": "hire",  # correct, but wasteful beyond the must-nots (copying at fork)
    "hygiene": "hire",     # validation, dtypes, reported warnings
}
FAILURE_KINDS = tuple(FAILURE_CAPS)


def level_rank(level: str | None) -> int:
    return -1 if level is None else LEVELS.index(level)


def plural(n: int, one: str, many: str | None = None) -> str:
    """ "1 key", "2 keys", "4,093 keys": the one way messages count things."""
    return f"{n:,} {one if n == 1 else many or one + 's'}"


# -- plain data ----------------------------------------------------------------------------------

TEXT_MAX = 4000  # characters kept of one string (after control characters became escapes)
ITEMS_MAX = 64  # entries kept of one list or dict
DEPTH_MAX = 8  # nesting kept
PICTURE_MAX = (64, 128)  # rows, columns a picture may hold (the checks crop to 16 x 48)

# C0 (bar tab and newline), DEL, C1, bidi marks, embeddings, overrides and isolates, zero-width
# and other invisible format characters, line and paragraph separators: each can rewrite a
# terminal, hide text or reorder it.
_NONCHARACTERS = "\ufdd0-\ufdef" + "".join(chr(plane << 16 | 0xFFFE) + chr(plane << 16 | 0xFFFF) for plane in range(17))
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff\ufff9-\ufffb" + _NONCHARACTERS + "]")  # noncharacters: XML forbids U+FFFE/F


def neutral(text: str) -> str:
    """``text`` with every control, bidi, zero-width or non-character shown as a visible escape."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}" if ord(m.group()) < 0x10000 else f"\\U{ord(m.group()):08x}",
                       text)


def neutralized(value):
    """A copy of a Result (or any part of it) whose every string went through ``neutral``.

    Applied once where a result is loaded or made, before any renderer: messages, errors,
    cases, notes and paths all come from candidate code or candidate-named files.
    """
    if isinstance(value, str):
        return neutral(value)
    if isinstance(value, list):
        return [neutralized(v) for v in value]
    if isinstance(value, dict):
        return {neutralized(k): neutralized(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: neutralized(getattr(value, f.name)) for f in fields(value) if f.init})
    return value


def plain_text(value) -> str:
    """Any value as a bounded line-safe string (surrogates, which no file can encode, escaped);
    anything but a string is written as its plain data (never by its own ``str``, which for a huge
    array would format all of it)."""
    text = neutral(str(value) if isinstance(value, str) else json.dumps(plain(value), ensure_ascii=False))
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= TEXT_MAX else f"{text[:TEXT_MAX]}... ({len(text) - TEXT_MAX} more characters)"


def plain(value, depth: int = 0):
    """``value`` as JSON data (None, bool, int, finite float, str, list, dict with str keys),
    bounded in size and depth: what a result may hold, whatever a child or a check produced."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    if isinstance(value, (int, np.integer)):
        number = int(value)
        return number if abs(number) < 2**63 else f"an integer of {number.bit_length()} bits"
    if isinstance(value, (float, np.floating)):
        number = float(value)
        return number if math.isfinite(number) else repr(number)  # 'nan', 'inf', '-inf': JSON has none
    if isinstance(value, str):
        return plain_text(value)
    if depth >= DEPTH_MAX:
        return f"a {type(value).__name__} nested too deep"
    if isinstance(value, np.ndarray):
        small = value.size <= ITEMS_MAX and value.ndim <= 2 and value.dtype.kind in "biuf"
        return plain(value.tolist(), depth) if small else f"a {value.dtype} array of shape {value.shape}"
    if isinstance(value, dict):
        items = [(plain_text(k), plain(v, depth + 1)) for k, v in list(value.items())[:ITEMS_MAX]]
        return dict(items + ([("...", f"{len(value) - ITEMS_MAX} more")] if len(value) > ITEMS_MAX else []))
    if isinstance(value, (list, tuple)):
        more = [f"... and {len(value) - ITEMS_MAX} more"] if len(value) > ITEMS_MAX else []
        return [plain(v, depth + 1) for v in value[:ITEMS_MAX]] + more
    return f"a {type(value).__name__}"


def plain_texts(value) -> list[str]:
    """A list of strings (skipped links, names of tests): anything else in it becomes its text."""
    items = value if isinstance(value, (list, tuple)) else [] if value is None else [value]
    return [plain_text(v) for v in items[:ITEMS_MAX]]


def plain_own_tests(value) -> dict:
    """The own-tests summary (grader/own_tests.py): a score in [0, 1] and three lists of names."""
    value = value if isinstance(value, dict) else {}
    score = plain(value.get("score"))
    return {"score": score if type(score) in (int, float) and 0 <= score <= 1 else 0.0,
            **{name: plain_texts(value.get(name)) for name in ("caught", "missed", "set_aside")}}


def plain_case(value) -> dict | None:
    """What a failing check tried: a dict of plain data (anything else is kept under "case")."""
    if value is None:
        return None
    return plain(value if isinstance(value, dict) else {"case": value})


def picture_problem(value) -> str | None:
    """How ``value`` fails to be a picture the renderers can draw (see render/pictures.py), or None."""
    if not isinstance(value, dict):
        return f"is {type(value).__name__}, not an object"
    for name in ("expected", "submitted"):
        grid = value.get(name)
        if not isinstance(grid, list) or len(grid) > PICTURE_MAX[0] or not all(
                isinstance(row, list) and len(row) <= PICTURE_MAX[1]
                and all(type(cell) is int and 0 <= cell < 10 for cell in row) for row in grid):
            return f"{name} is not a grid of at most {PICTURE_MAX[0]} x {PICTURE_MAX[1]} cells of 0-9"
    for name in ("shape", "origin"):
        pair = value.get(name, [0, 0])
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(n) is int and 0 <= n < 2**63 for n in pair)):
            return f"{name} is not two non-negative integers"
    labels = value.get("labels", {})
    if not isinstance(labels, dict) or not all(
            isinstance(k, str) and k.isdigit() and len(k) == 1 and isinstance(v, str) and len(v) == 1
            for k, v in labels.items()):
        return "labels do not map digits to one character each"
    if not isinstance(value.get("title", ""), str):
        return "title is not text"
    return None


def plain_picture(value) -> dict | None:
    """A picture made plain, or None when it cannot be drawn (it illustrates, it never decides)."""
    if value is None:
        return None
    value = plain(value)
    return None if picture_problem(value) else value


def _plain_dict(value) -> dict:
    value = plain(value)
    return value if isinstance(value, dict) else {}


def plain_timeline(value) -> dict:
    """The candidate's attempt log (grader/timeline.py), lists of the wrong shape left empty."""
    log = _plain_dict(value)
    points, diagnoses = log.get("points"), log.get("diagnoses")
    points = [p for p in points if isinstance(p, list) and len(p) == 3 and all(type(x) in (int, float) for x in p)] \
        if isinstance(points, list) else []
    diagnoses = [d for d in diagnoses if isinstance(d, dict) and isinstance(d.get("id"), str)] \
        if isinstance(diagnoses, list) else []
    return {**log, "points": points, "diagnoses": diagnoses} if log else {}


def _plain_pairs(value) -> list[list[str]]:
    items = value if isinstance(value, (list, tuple)) else []
    return [plain_texts(pair) for pair in items[:ITEMS_MAX] if isinstance(pair, (list, tuple)) and len(pair) == 2]


def _optional(clean):
    return lambda value: None if value is None else clean(value)


class _Plain:
    """Fields named in ``_PLAIN`` go through their cleaner on every assignment, the dataclass's
    own ``__init__`` included: the one place candidate-made values enter a result."""
    _PLAIN: ClassVar[dict] = {}

    def __setattr__(self, name, value):
        clean = self._PLAIN.get(name)
        super().__setattr__(name, clean(value) if clean else value)


@dataclass
class CheckResult(_Plain):
    id: str
    passed: bool
    message: str = ""
    description: str = ""  # what the check tries, in words safe to show a candidate
    case: dict | None = None  # what was tried when it failed (shape, seed): enough to reproduce
    picture: dict | None = None  # a small failing case to draw: see grader/pictures.py
    seconds: float = 0.0
    kind: str | None = None  # for a failure: one of FAILURE_KINDS
    named: list = field(default_factory=list)  # [diagnosis id, sentence] pairs this check named in its message

    _PLAIN: ClassVar[dict] = {"id": plain_text, "message": plain_text, "description": plain_text,
                              "case": plain_case, "picture": plain_picture, "named": _plain_pairs}


@dataclass
class Diagnosis(_Plain):
    id: str
    message: str
    caps: str = "weak"  # the highest level reachable with this mistake
    explain: str = ""  # the rubric's general explanation of the mistake

    _PLAIN: ClassVar[dict] = {"id": plain_text, "message": plain_text}


@dataclass
class Criterion:
    id: str
    level: str
    text: str  # the rubric's words, or a grader-only build's note on what it could not judge
    kind: str  # "check": automatic, from check ids; "observed": recorded by the interviewer
    status: str  # "met" | "missed" | "to_observe"
    checks: list = field(default_factory=list)


@dataclass
class ExerciseResult(_Plain):
    id: str
    status: str  # "graded" | "not_attempted" | "error"
    level: str | None = None
    checks: list = field(default_factory=list)
    diagnoses: list = field(default_factory=list)
    error: str | None = None
    title: str = ""
    criteria: list = field(default_factory=list)
    follow_ups: list = field(default_factory=list)
    notes: str = ""
    module: str | None = None  # where the candidate's module was found
    seconds: float = 0.0
    required: bool = False  # chosen with -e: counted even when not attempted
    provisional: bool = False  # observed criteria at or below the level are still unrecorded
    to_observe: list = field(default_factory=list)  # their ids
    reason: str = ""  # one line: why the level is what it is
    to_raise: str = ""  # one line: what would raise (or confirm) it
    hygiene: str = ""  # one line: substance and hygiene apart
    kit_error: bool = False  # the failure is the kit's own (the reference shows it too): no verdict
    about: str = ""  # the rubric's summary, for the interviewer
    level_guide: dict = field(default_factory=dict)  # the rubric's words for each level, for the interviewer
    own_tests: dict | None = None  # score, caught, missed, set_aside: see grader/own_tests.py
    hints_offered: int = 0  # staged hints the rubric has (kvgrade hint ID prints them in order)
    hints_given: list = field(default_factory=list)  # hint numbers (from 1) an interviewer recorded: they cap the level
    timeline: dict = field(default_factory=dict)  # the candidate's own attempt log (grader/timeline.py): context only
    interviewer: dict = field(default_factory=dict)  # the rubric's interviewer sheet (grader/interview.py)
    output_note: str | None = None  # "output truncated after 8 MiB" when the child printed past the cap
    rubric: dict = field(default_factory=dict)  # what it was judged with: rubric.record (id, sha256, rules)

    _PLAIN: ClassVar[dict] = {"error": _optional(plain_text), "notes": plain_text, "module": _optional(plain_text),
              "own_tests": _optional(plain_own_tests), "timeline": plain_timeline, "output_note": _optional(plain_text)}

    @property
    def passed_checks(self) -> int:
        return sum(c.passed for c in self.checks)

    @property
    def counted(self) -> bool:
        """Part of the overall level: required, or attempted (self-study)."""
        return self.required or self.status != "not_attempted"

    @property
    def share_passed(self) -> float:
        """Share of this exercise's checks passed; 0 when none ran (not attempted, an error)."""
        return self.passed_checks / len(self.checks) if self.checks and self.status == "graded" else 0.0

    def judged(self, judgement) -> "ExerciseResult":
        """Take a ``rubric.Judgement``'s level and explanations."""
        self.level, self.provisional, self.to_observe = judgement.level, judgement.provisional, judgement.to_observe
        self.reason, self.to_raise, self.hygiene = judgement.reason, judgement.to_raise, judgement.hygiene
        self.criteria = judgement.criteria
        return self


# The rubric's words: shown in reports, never saved in a result (its ``rubric`` record keeps what
# re-judging needs; a report re-read from a file takes the words from the kit, notes.reread).
RUBRIC_PROSE = ("about", "level_guide", "follow_ups", "interviewer")


def _saved(e: ExerciseResult) -> dict:
    """An exercise as result.json holds it: no rubric prose. Criteria keep their few words, since a
    grader-only build rewrites some of them to say what it could not judge."""
    return {k: v for k, v in asdict(e).items() if k not in RUBRIC_PROSE}


@dataclass
class Result(_Plain):
    seed: int
    submission: str
    exercises: list = field(default_factory=list)
    isolation: str = "process"
    feedback: str = "detail"
    kvgrade_version: str = ""
    seconds: float = 0.0
    schema: str = SCHEMA
    session: dict = field(default_factory=dict)  # a kvgrade start workspace's time box and use: context only
    bounds: dict = field(default_factory=dict)  # which limits held for the children: see sandbox.isolation_report
    skipped_links: list = field(default_factory=list)  # links in the submission, never followed
    levels_hidden: bool = False  # summary feedback without --show-levels: levels blanked, not shown
    live: bool = False  # graded live (the interviewer's --live, or the live room): see rubrics/README.md
    caveats: list = field(default_factory=list)  # what every report says first: a saved level re-derived, ...
    submission_name: str = ""  # the folder's or zip's own name, read when graded: titles say it for "." or ".."

    _PLAIN: ClassVar[dict] = {"submission": plain_text, "session": _plain_dict, "skipped_links": plain_texts,
                              "caveats": plain_texts, "submission_name": plain_text}

    @property
    def label(self) -> str:
        """The submission as a title names it: the path as given, after its own name where the path has none
        (".", "..", "./")."""
        if self.submission_name and Path(self.submission).name in ("", "..") and self.submission_name != ".":
            return f"{self.submission_name} ({self.submission})"
        return self.submission

    @property
    def counted(self) -> list[ExerciseResult]:
        return [e for e in self.exercises if e.counted]

    @property
    def overall_level(self) -> str | None:
        """The lowest level among counted exercises: strong overall means strong on all asked.

        In self-study (no -e) an exercise not attempted is not counted; in an interview set
        every chosen one is, and one not attempted is weak. A kit error anywhere leaves no
        verdict (None), never a higher one; so does a run where nothing counts.
        """
        counted = self.counted
        if not counted or any(e.kit_error or e.level is None for e in counted):
            return None
        return min((e.level for e in counted), key=level_rank)

    @property
    def overall_reason(self) -> str:
        """One line: the exercises that set the overall level, each with its own reason
        ("nan_safe_softmax: hint 2 given (caps at hire)"), so a level never stands unexplained."""
        overall = self.overall_level
        if self.levels_hidden:  # a candidate's copy: no level, so no reason for one
            return ""
        if overall is None:
            broken = [e.id for e in self.counted if e.kit_error or e.level is None]
            return f"no verdict: {', '.join(broken)} has none" if broken else "no exercise counted"
        setting = [e for e in self.counted if e.level == overall]
        parts = [f"{e.id}: {e.reason.split(': ', 1)[-1]}" if e.reason else e.id for e in setting]
        return "; ".join(parts[:2]) + (f"; and {plural(len(parts) - 2, 'more exercise')}" if len(parts) > 2 else "")

    @property
    def overall_provisional(self) -> bool:
        """Some counted exercise still waits on an observation that could lower the overall level."""
        overall = self.overall_level
        return overall is not None and any(
            c.status == "to_observe" and level_rank(c.level) <= level_rank(overall)
            for e in self.counted for c in e.criteria)

    @property
    def overall_to_observe(self) -> list[str]:
        overall = self.overall_level
        return [f"{e.id}.{c.id}" for e in self.counted for c in e.criteria
                if overall and c.status == "to_observe" and level_rank(c.level) <= level_rank(overall)]

    @property
    def score(self) -> float:
        """Mean share of checks passed over counted exercises (each weighs the same; one
        required but not attempted, or failing with an error, adds 0), for ranking within a level."""
        counted = self.counted
        return round(sum(e.share_passed for e in counted) / len(counted), 4) if counted else 0.0

    def exercise(self, exercise_id: str) -> ExerciseResult:
        return next(e for e in self.exercises if e.id == exercise_id)

    def to_dict(self) -> dict:
        return {
            "schema": self.schema,
            "seed": self.seed,
            "submission": self.submission,
            **({"submission_name": self.submission_name} if self.submission_name else {}),
            "overall": {"level": self.overall_level, "provisional": self.overall_provisional,
                        "to_observe": self.overall_to_observe, "score": self.score, "reason": self.overall_reason},
            "isolation": self.isolation,
            "bounds": self.bounds,
            "skipped_links": self.skipped_links,
            "feedback": self.feedback,
            "kvgrade_version": self.kvgrade_version,
            "seconds": round(self.seconds, 3),
            "live": self.live,
            "exercises": [_saved(e) for e in self.exercises],
            "session": self.session,
            **({"levels_hidden": True} if self.levels_hidden else {}),
            **({"caveats": self.caveats} if self.caveats else {}),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        problem = schema_problem(data)
        if problem:
            raise ValueError(f"not a kvgrade result: {problem}")
        exercises = []
        for e in data.get("exercises", []):
            e = _known(ExerciseResult, e)
            e["checks"] = [CheckResult(**_known(CheckResult, c)) for c in e.get("checks", [])]
            e["diagnoses"] = [Diagnosis(**_known(Diagnosis, d)) for d in e.get("diagnoses", [])]
            e["criteria"] = [Criterion(**{"text": "", **_known(Criterion, c)}) for c in e.get("criteria", [])]
            exercises.append(ExerciseResult(**e))
        top = _known(cls, data)
        top["exercises"] = exercises
        return cls(**top)


def _known(kind, data: dict) -> dict:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}


# -- reading a saved result back: every field checked, deeply ------------------------------------
# A spec maps a field to a test that returns a problem ("is str, not int") or None. Fields
# marked REQUIRED must be there; the others take their defaults. A result file is data from
# anywhere (it may have been edited): what the renderers will meet is checked here, once.

REQUIRED = object()
STATUSES = ("graded", "not_attempted", "error")


def _kind(*kinds):
    def test(value):
        ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
        return None if ok else f"is {type(value).__name__}, not {' or '.join(k.__name__ for k in kinds)}"
    return test


def _one_of(*allowed):
    return lambda value: None if value in allowed and type(value) in (str, type(None)) else \
        f"is {str(value)[:40]!r}, not one of {', '.join(map(str, allowed))}"


def _maybe(test):
    return lambda value: None if value is None else test(value)


def _list_of(test):
    def check(value):
        if not isinstance(value, list):
            return f"is {type(value).__name__}, not a list"
        return next((f"[{i}] {problem}" for i, v in enumerate(value) if (problem := test(v))), None)
    return check


def _is_plain(value):
    """Plain data as a result writes it (a fixed point of ``plain``): bounded, no NaN, str keys.
    Its strings may hold control characters: they are made visible as the result is built."""
    try:
        return None if plain(value) == _texts_made_plain(value) else "is not plain data within the result's bounds"
    except RecursionError:
        return "is nested too deep"


def _texts_made_plain(value):
    if isinstance(value, str):
        return plain_text(value)
    if isinstance(value, list):
        return [_texts_made_plain(v) for v in value]
    if isinstance(value, dict):
        return {_texts_made_plain(k) if isinstance(k, str) else k: _texts_made_plain(v) for k, v in value.items()}
    return value


def _shaped(clean, what: str):
    """Plain data that ``clean`` (the field's cleaner) leaves as it is, strings apart."""
    return _all(_PLAIN_DICT, lambda v: None if clean(v) == _texts_made_plain(v) else f"is not {what}")


def _fits(check):
    return lambda value: None if (problem := check(value)) is None else f"does not fit: {problem}"


def _all(*tests):
    return lambda value: next((problem for t in tests if (problem := t(value))), None)


def _number(low=0.0):
    return _all(_kind(int, float), lambda v: None if (isinstance(v, int) or math.isfinite(v)) and v >= low
                else f"is {v}, not >= {low}")  # an int is finite however long (math.isfinite would overflow)


_TEXT, _FLAG, _PLAIN_DICT = _kind(str), _kind(bool), _all(_kind(dict), _is_plain)


def _pair(value):
    return None if len(value) == 2 else f"holds {len(value)} items, not 2"

_TEXTS = _list_of(_TEXT)
_SPECS = {
    Result: {"seed": (REQUIRED, _all(_kind(int), _number())), "submission": (REQUIRED, _TEXT),
             "exercises": (REQUIRED, _kind(list)), "isolation": _TEXT, "feedback": _one_of("summary", "detail"),
             "kvgrade_version": _TEXT, "seconds": _number(), "session": _PLAIN_DICT, "bounds": _PLAIN_DICT,
             "skipped_links": _TEXTS, "levels_hidden": _FLAG, "live": _FLAG, "submission_name": _TEXT},
    ExerciseResult: {
        "id": (REQUIRED, _TEXT), "status": (REQUIRED, _one_of(*STATUSES)), "level": _one_of(*LEVELS, None),
        "error": _maybe(_TEXT), "title": _TEXT, "follow_ups": _list_of(_PLAIN_DICT), "notes": _TEXT,
        "module": _maybe(_TEXT), "seconds": _number(), "required": _FLAG, "provisional": _FLAG,
        "to_observe": _TEXTS, "reason": _TEXT, "to_raise": _TEXT, "hygiene": _TEXT, "kit_error": _FLAG,
        "about": _TEXT, "level_guide": _PLAIN_DICT,
        "own_tests": _maybe(_shaped(plain_own_tests, "an own-tests summary")),
        "hints_offered": _all(_kind(int), _number()), "hints_given": _list_of(_all(_kind(int), _number(1))),
        "timeline": _shaped(plain_timeline, "an attempt log"),
        "interviewer": _PLAIN_DICT, "output_note": _maybe(_TEXT), "rubric": _PLAIN_DICT},
    CheckResult: {"id": (REQUIRED, _TEXT), "passed": (REQUIRED, _FLAG), "message": _TEXT, "description": _TEXT,
                  "case": _maybe(_PLAIN_DICT), "picture": _maybe(_fits(picture_problem)), "seconds": _number(),
                  "kind": _one_of(*FAILURE_KINDS, None), "named": _list_of(_all(_TEXTS, _pair))},
    Diagnosis: {"id": (REQUIRED, _TEXT), "message": (REQUIRED, _TEXT), "caps": _one_of(*LEVELS, None),
                "explain": _TEXT},
    Criterion: {"id": (REQUIRED, _TEXT), "level": (REQUIRED, _one_of(*LEVELS[1:])), "text": _TEXT,
                "kind": (REQUIRED, _one_of("check", "observed")),
                "status": (REQUIRED, _one_of("met", "missed", "to_observe")), "checks": _TEXTS},
}
_PARTS = {"checks": CheckResult, "diagnoses": Diagnosis, "criteria": Criterion}


def schema_problem(data) -> str | None:
    """The first way ``data`` (parsed JSON) fails to be a saved result, or None when it is one."""
    if not isinstance(data, dict):
        return f"the top level is {type(data).__name__}, not an object"
    if data.get("schema") != SCHEMA:
        return f"schema {str(data.get('schema'))[:40]!r}, expected {SCHEMA!r}"
    problem = _object_problem(data, Result, "result")
    seen = set()
    for i, exercise in enumerate(data["exercises"] if not problem else []):
        problem = problem or _exercise_problem(exercise, f"exercises[{i}]")
        if not problem and exercise["id"] in seen:  # one grading holds each exercise once
            problem = f"exercises[{i}] repeats the exercise {str(exercise['id'])[:40]!r}"
        seen.add(None if problem else exercise["id"])
    return problem


def _exercise_problem(exercise, where: str) -> str | None:
    problem = _object_problem(exercise, ExerciseResult, where)
    for part, kind in _PARTS.items():
        entries = exercise.get(part, []) if not problem else []
        if not isinstance(entries, list):
            return f"{where}.{part} is {type(entries).__name__}, not a list"
        for j, entry in enumerate(entries):
            problem = problem or _object_problem(entry, kind, f"{where}.{part}[{j}]")
    return problem


def _object_problem(value, kind, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}, not an object"
    for name, spec in _SPECS[kind].items():
        required, test = spec if isinstance(spec, tuple) else (False, spec)
        if name not in value:
            if required:
                return f"{where} has no {name!r}"
            continue
        problem = test(value[name])
        if problem:
            return f"{where}.{name} {problem}"
    return None
