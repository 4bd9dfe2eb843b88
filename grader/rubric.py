"""Rubrics as a typed model, and the one level rule: ``judge``.

A rubric (``rubrics/<id>.toml``, format and calibration in ``rubrics/README.md``) is read
once into a ``Rubric`` and validated as it loads: a problem is a ``RubricError`` naming the
field. ``judge`` turns everything a level depends on (check outcomes, diagnoses, what an
interviewer recorded, hints given) into a ``Judgement``; the engine, notes and verify all use it.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import plainfile
from .result import FAILURE_CAPS, LEVELS, CheckResult, Criterion, Diagnosis, level_rank, plural

HIRE_CAPPED_KINDS = tuple(kind for kind, cap in FAILURE_CAPS.items() if cap == "hire")


class RubricError(ValueError):
    """A rubric file that cannot be read or does not follow the format."""


@dataclass(frozen=True)
class RubricCriterion:
    id: str
    level: str  # "hire" or "strong_hire"
    text: str
    checks: tuple[str, ...] = ()  # automatic: met when every one passed
    kind: str | None = None  # automatic strong_hire: the one hire-capped failure kind it stands for
    validation: bool = False  # validation beyond the prompt's cases: observed, not automatic, when live

    @property
    def observed(self) -> bool:
        """Only an interviewer can meet or miss it."""
        return not self.checks


# Worded forms of the kit's rules that telltales (written as code) do not catch, for every exercise.
WORDED_RULES = (r"\bP\s*\+\s*depth\b", r"ancestors,? and (it)?self", r"cache, (its )?ancestors",
                r"exactly [\d,]+ of [\d,]+", r"\bS\s*-\s*T\s*\+\s*i\b", r"bottom[- ]right", r"len\(cache\)\s*\+",
                r"top[- ]left", r"bottom rows", r"every tile is FULL")


def normalised(text: str) -> str:
    """Whitespace runs as one space, none around operators, lower case: "S-T" reads as "s - t"."""
    return re.sub(r" ?([^\w ]) ?", r"\1", re.sub(r"\s+", " ", text)).lower()


@dataclass(frozen=True)
class DiagnosisRule:
    id: str
    caps: str
    explain: str = ""
    contract: bool = False  # one of the classic mistakes CONTRACT.md names: it caps at weak
    validation: bool = False  # a missing validation: caps nothing when live (its criterion is observed)


@dataclass(frozen=True)
class OwnTests:
    classic: str  # hire needs the suite to catch this known-wrong version
    scored: tuple[str, ...]  # known-wrong versions, by name (solutions/mutants/<id>/<name>.py)
    strong_hire_score: float


@dataclass(frozen=True)
class Hint:
    text: str
    caps: str


@dataclass(frozen=True)
class Checkpoint:
    minutes: int
    expect: str


@dataclass(frozen=True)
class FollowUp:
    ask: str
    listen_for: str


@dataclass(frozen=True)
class Rubric:
    title: str
    summary: str
    levels: dict  # level -> what it looks like, in words for the interviewer
    criteria: tuple[RubricCriterion, ...]
    diagnoses: tuple[DiagnosisRule, ...]
    follow_ups: tuple[FollowUp, ...]
    own_tests: OwnTests | None = None
    hints: tuple[Hint, ...] = ()
    checkpoints: tuple[Checkpoint, ...] = ()
    telltales: tuple[str, ...] = ()
    time_box_minutes: int | None = None
    take_home: bool = False

    def states_rule(self, text: str) -> bool:
        """Whether ``text`` states the rule being tested: one of the rubric's ``telltales`` (whitespace, spacing
        around operators and case aside) or a worded form of a rule (``WORDED_RULES``). A text a candidate
        reads must not (prompts, check descriptions, the explanations their copy of a result keeps)."""
        shown = normalised(text)
        return (any(normalised(t) in shown for t in self.telltales)
                or any(re.search(w, text, re.IGNORECASE) for w in WORDED_RULES))

    def diagnosis(self, diagnosis_id: str) -> DiagnosisRule:
        """The rubric's rule for a diagnosis; one it does not name caps at weak."""
        return next((d for d in self.diagnoses if d.id == diagnosis_id),
                    DiagnosisRule(diagnosis_id, "weak"))

    def make_diagnosis(self, diagnosis_id: str, message: str) -> Diagnosis:
        rule = self.diagnosis(diagnosis_id)
        return Diagnosis(diagnosis_id, message, rule.caps, rule.explain)

    @property
    def check_ids(self) -> set[str]:
        return {check for c in self.criteria for check in c.checks}


# ---------------------------------------------------------------------------- loading

TOML_BYTES = 1 << 20  # a rubric or an interviewer's notes: a few KiB


def read_toml(path: str | Path) -> dict:
    """The TOML file at ``path`` as a dict; a ``ValueError`` says in a few words why it cannot be
    (unreadable, not UTF-8 text, not valid TOML). Rubrics and interviewer notes both read so."""
    try:  # a regular file of at most a MiB, never a FIFO or a device (a notes file is anyone's to give)
        return tomllib.loads(plainfile.read_plain_file(path, TOML_BYTES).decode("utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:  # a binary file: not text, let alone TOML
        raise ValueError(f"it is not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None


def load(path: Path) -> Rubric:
    """Read and validate ``path``; a ``RubricError`` says which field is wrong."""
    try:
        data = read_toml(path)
    except ValueError as exc:
        raise RubricError(str(exc)) from None
    return parse(data)


def parse(data: dict) -> Rubric:
    for key in ("title", "summary", "levels", "criteria", "diagnoses", "follow_ups"):
        if key not in data:
            raise RubricError(f"has no {key}")
    levels = _table(data, "levels")
    if set(levels) != set(LEVELS) or not all(isinstance(v, str) for v in levels.values()):
        raise RubricError(f"[levels] needs exactly {', '.join(LEVELS)}, each a sentence")
    rubric = Rubric(
        title=_text(data, "title"), summary=_text(data, "summary").strip(), levels=dict(levels),
        criteria=tuple(_criterion(c) for c in _tables(data, "criteria")),
        diagnoses=tuple(_diagnosis(d) for d in _tables(data, "diagnoses")),
        follow_ups=tuple(FollowUp(_text(f, "ask"), _text(f, "listen_for")) for f in _tables(data, "follow_ups")),
        own_tests=_own_tests(data["own_tests"]) if "own_tests" in data else None,
        hints=tuple(Hint(_text(h, "text"), _level(h, "caps", LEVELS)) for h in _tables(data, "hints")),
        checkpoints=tuple(Checkpoint(_int(c, "minutes"), _text(c, "expect")) for c in _tables(data, "checkpoints")),
        telltales=tuple(_strings(data, "telltales")),
        time_box_minutes=_int(data, "time_box_minutes") if "time_box_minutes" in data else None,
        take_home=_bool(data, "take_home") if "take_home" in data else False)
    _check_unique("criterion", [c.id for c in rubric.criteria])
    _check_unique("diagnosis", [d.id for d in rubric.diagnoses])
    if rubric.own_tests and rubric.own_tests.classic not in rubric.own_tests.scored:
        raise RubricError(f"[own_tests] classic is {rubric.own_tests.classic!r}, which is not one of scored")
    return rubric  # scored names known-wrong versions, which a grader-only build lacks: tests check they exist


def _criterion(c: dict) -> RubricCriterion:
    cid = _text(c, "id")
    if ("checks" in c) == ("observe" in c):
        raise RubricError(f"criterion {cid} needs exactly one of checks / observe")
    level = _level(c, "level", LEVELS[1:])
    if "observe" in c:
        return RubricCriterion(cid, level, _text(c, "observe"))
    checks = tuple(_strings(c, "checks"))
    if not checks:
        raise RubricError(f"criterion {cid} lists no checks")
    kind = c.get("kind")
    if kind is not None and kind not in HIRE_CAPPED_KINDS:
        raise RubricError(f"criterion {cid}: kind {kind!r} is not one of {', '.join(HIRE_CAPPED_KINDS)}")
    validation = _bool(c, "validation") if "validation" in c else False
    if validation and (level, kind) != ("strong_hire", "hygiene"):
        raise RubricError(f"criterion {cid}: validation = true needs level strong_hire and kind hygiene")
    return RubricCriterion(cid, level, _text(c, "text"), checks, kind, validation)


def _diagnosis(d: dict) -> DiagnosisRule:
    rule = DiagnosisRule(_text(d, "id"), _level(d, "caps", LEVELS) if "caps" in d else "weak",
                         " ".join(_text(d, "explain").split()) if "explain" in d else "",
                         _bool(d, "contract") if "contract" in d else False,
                         _bool(d, "validation") if "validation" in d else False)
    if rule.validation and (rule.contract or rule.caps != "hire"):
        raise RubricError(f"diagnosis {rule.id}: validation = true needs caps = \"hire\" and no contract")
    return rule


def _own_tests(data) -> OwnTests:
    if not isinstance(data, dict):
        raise RubricError("[own_tests] should be a table")
    score = data.get("strong_hire_score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 < score <= 1:
        raise RubricError("[own_tests] strong_hire_score should be a number in (0, 1]")
    return OwnTests(_text(data, "classic"), tuple(_strings(data, "scored")), float(score))


def _table(data: dict, key: str) -> dict:
    if not isinstance(data.get(key), dict):
        raise RubricError(f"[{key}] should be a table")
    return data[key]


def _tables(data: dict, key: str) -> list[dict]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RubricError(f"{key} should be an array of tables ([[{key}]])")
    return value


def _text(data: dict, key: str) -> str:
    if not isinstance(data.get(key), str) or not data[key].strip():
        raise RubricError(f"{key} should be a non-empty string (in {_where(data)})")
    return data[key]


def _strings(data: dict, key: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RubricError(f"{key} should be a list of strings (in {_where(data)})")
    return value


def _int(data: dict, key: str) -> int:
    if isinstance(data.get(key), bool) or not isinstance(data.get(key), int) or data[key] <= 0:
        raise RubricError(f"{key} should be a positive integer (in {_where(data)})")
    return data[key]


def _bool(data: dict, key: str) -> bool:
    if not isinstance(data.get(key), bool):
        raise RubricError(f"{key} should be true or false")
    return data[key]


def _level(data: dict, key: str, allowed) -> str:
    if data.get(key) not in allowed:
        raise RubricError(f"{key} {data.get(key)!r} should be one of {', '.join(allowed)} (in {_where(data)})")
    return data[key]


def _where(data: dict) -> str:
    return repr(data["id"]) if isinstance(data.get("id"), str) else "the rubric"


def _check_unique(what: str, ids: list[str]):
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise RubricError(f"{what} ids repeated: {', '.join(repeated)}")


# ---------------------------------------------------------------------------- the stored record

def record(rubric: Rubric, rubric_id: str, source: bytes) -> dict:
    """What a result stores of the rubric it was judged with: its id, the sha256 of its file,
    and every rule ``judge`` reads (criteria without their words, diagnosis and hint caps), so a
    report re-judges a saved result exactly as it was judged, whatever the kit holds now."""
    return {"id": rubric_id, "sha256": hashlib.sha256(source).hexdigest(),
            "criteria": [{"id": c.id, "level": c.level, "checks": list(c.checks),
                          **({"kind": c.kind} if c.kind else {}), **({"validation": True} if c.validation else {})}
                         for c in rubric.criteria],
            "diagnoses": {d.id: d.caps for d in rubric.diagnoses},
            "validation_diagnoses": [d.id for d in rubric.diagnoses if d.validation],
            "hints": [h.caps for h in rubric.hints]}


def from_record(data: dict) -> Rubric:
    """The judging part of a stored rubric (``record``), checked as strictly as a rubric file:
    a ``RubricError`` names the field. Its words are empty: they are not stored."""
    if not isinstance(data, dict) or not isinstance(data.get("diagnoses"), dict):
        raise RubricError("the stored rubric has no table of diagnoses")
    validation = set(_strings(data, "validation_diagnoses"))
    hints = data.get("hints", [])
    if not isinstance(hints, list) or not all(h in LEVELS for h in hints):
        raise RubricError(f"the stored rubric's hints should be levels ({', '.join(LEVELS)})")
    criteria = [_stored_criterion(c) for c in _tables(data, "criteria")]
    diagnoses = [DiagnosisRule(i, _level({"caps": caps, "id": i}, "caps", LEVELS), validation=i in validation)
                 for i, caps in data["diagnoses"].items()]
    _check_unique("criterion", [c.id for c in criteria])
    return Rubric(_text(data, "id"), "", {}, tuple(criteria), tuple(diagnoses), (),
                  hints=tuple(Hint("", caps) for caps in hints))


def _stored_criterion(c: dict) -> RubricCriterion:
    """A criterion as ``record`` stores it: no words; no checks means observed."""
    kind = c.get("kind")
    if kind is not None and kind not in HIRE_CAPPED_KINDS:
        raise RubricError(f"criterion {_where(c)}: kind {str(kind)[:40]!r} is not one of "
                          f"{', '.join(HIRE_CAPPED_KINDS)}")
    return RubricCriterion(_text(c, "id"), _level(c, "level", LEVELS[1:]), "", tuple(_strings(c, "checks")), kind,
                           _bool(c, "validation") if "validation" in c else False)


# ---------------------------------------------------------------------------- the level rule

@dataclass
class Judgement:
    level: str
    provisional: bool  # observed criteria at or below the level are still unrecorded
    to_observe: list[str]  # their ids
    reason: str  # one line: why the level is what it is
    to_raise: str  # one line: what would raise it (or confirm it)
    hygiene: str  # one line apart: substance, then hygiene ("correct and efficient; validation missing")
    criteria: list[Criterion] = field(default_factory=list)


@dataclass(frozen=True)
class _Cap:
    level: str
    cause: str  # as a reader sees it: "plain_decode (wrong)"
    fixes: tuple[str, ...]  # what lifts it, one step each: ("pass plain_decode",)
    hint: str | None = None  # "hint 2" for a recorded hint's cap, which nothing lifts


def judge(rubric: Rubric, checks: list[CheckResult], diagnoses: list[Diagnosis],
          observed: dict[str, bool], hints=(), live: bool = False) -> Judgement:
    """The level of one graded exercise. ``hints`` are indices into ``rubric.hints``.

    Start at strong_hire. Every failing check caps at its kind's cap (``FAILURE_CAPS``; no
    kind counts as "wrong"), every diagnosis at the rubric's cap, every recorded hint at its
    cap. An automatic criterion missed, or an observed one recorded false, caps one level
    below its own. Observed criteria unrecorded at or below the level reached never lower
    it: they make it provisional. The level follows failure kinds, not criteria: a wrong
    value in a strong_hire criterion's check still caps at weak, and a hire criterion missed
    only through hygiene failures caps at hire, not below.

    ``live``: a validation criterion not met is observed instead ("asked how they would
    validate"), and its checks' hygiene failures and the validation diagnoses cap nothing.
    """
    by_id = {c.id: c for c in checks}
    crits = criteria(rubric, {c.id: c.passed for c in checks}, observed, live)
    waived = _observed_live(rubric, crits)
    counted = [c for c in checks if not (c.id in waived and c.kind == "hygiene")]
    caps = (_diagnosis_caps(rubric, [d for d in diagnoses if not (live and rubric.diagnosis(d.id).validation)])
            + _failure_caps(counted) + _hint_caps(rubric, hints))  # named mistakes first
    caps += [_criterion_cap(c, by_id) for c in crits if c.status == "missed"]
    level = min((cap.level for cap in caps), key=level_rank, default=LEVELS[-1])
    to_observe = [c.id for c in crits
                  if c.status == "to_observe" and level_rank(c.level) <= level_rank(level)]
    binding = [cap for cap in caps if cap.level == level]
    missed = [c for c in crits if c.status == "missed" and LEVELS[level_rank(c.level) - 1] == level]
    return Judgement(level, bool(to_observe), to_observe, _reason(level, binding, missed, to_observe),
                     _to_raise(level, binding, to_observe), hygiene_line(checks), crits)


LIVE_ASK = "asked how they would validate: "  # a validation criterion observed in a live grading


def criteria(rubric: Rubric, passed: dict[str, bool], observed: dict[str, bool], live: bool = False) -> list[Criterion]:
    """Each criterion's status: automatic from check outcomes (a check not run is not passed),
    observed from the interviewer's record ("to_observe" when there is none). Live, a validation
    criterion whose checks did not all pass is observed, keeping its checks."""
    out = []
    for c in rubric.criteria:
        met = all(passed.get(check, False) for check in c.checks)
        if c.observed or (live and c.validation and not met):
            status = {True: "met", False: "missed"}.get(observed.get(c.id), "to_observe")
            text = LIVE_ASK + c.text if c.checks else c.text
            out.append(Criterion(c.id, c.level, text, "observed", status, list(c.checks)))
        else:
            out.append(Criterion(c.id, c.level, c.text, "check", "met" if met else "missed", list(c.checks)))
    return out


def _observed_live(rubric: Rubric, crits: list[Criterion]) -> set[str]:
    """Checks that sit only under validation criteria judged as observed (live): their hygiene
    failures are the interviewer's to weigh, not a cap."""
    observed = {c.id for c in crits if c.kind == "observed" and c.checks}
    automatic = {check for c in rubric.criteria if c.id not in observed for check in c.checks}
    return {check for c in rubric.criteria if c.id in observed for check in c.checks} - automatic


def _failure_caps(checks: list[CheckResult]) -> list[_Cap]:
    out = []
    for c in checks:
        if not c.passed:
            kind = c.kind if c.kind in FAILURE_CAPS else "wrong"
            out.append(_Cap(FAILURE_CAPS[kind], f"{c.id} ({kind})", (f"pass {c.id}",)))
    return out


def _criterion_cap(c: Criterion, checks: dict[str, CheckResult]) -> _Cap:
    below = LEVELS[level_rank(c.level) - 1]
    if c.kind == "observed":
        return _Cap(below, "", (f"show {c.id}",))
    unmet = [check for check in c.checks if check not in checks or not checks[check].passed]
    if all(check in checks for check in unmet):  # all ran: the failures' kinds say how far it falls
        worst = min((FAILURE_CAPS.get(checks[check].kind, "weak") for check in unmet), key=level_rank)
        below = max(below, worst, key=level_rank)
    return _Cap(below, "", tuple(f"pass {check}" for check in unmet))


def _diagnosis_caps(rubric: Rubric, diagnoses: list[Diagnosis]) -> list[_Cap]:
    caps = [rubric.diagnosis(d.id).caps for d in diagnoses]
    return [_Cap(cap, f"{d.id} (caps at {_word(cap)})", (f"fix {d.id}",)) for d, cap in zip(diagnoses, caps)]


def _hint_caps(rubric: Rubric, hints) -> list[_Cap]:
    out = []
    for i in hints:
        if not 0 <= i < len(rubric.hints):
            raise ValueError(f"hint {i + 1} is not in the rubric (it has {len(rubric.hints)})")
        cap = rubric.hints[i].caps
        out.append(_Cap(cap, f"hint {i + 1} given (caps at {_word(cap)})", (), hint=f"hint {i + 1}"))
    return out


def _reason(level: str, binding: list[_Cap], missed: list[Criterion], to_observe: list[str]) -> str:
    parts = [_listed([cap.cause for cap in binding if cap.cause])]
    above = LEVELS[level_rank(level) + 1] if level != LEVELS[-1] else None
    if missed and above:
        parts.append(f"{plural(len(missed), 'criterion', 'criteria')} for {_word(above)} missed")
    parts = [p for p in parts if p] or ["every check passed, no classic mistake"]
    if to_observe:
        parts.append(f"provisional: {plural(len(to_observe), 'observation')} to record")
    return f"{_word(level)}: " + "; ".join(parts)


def _to_raise(level: str, binding: list[_Cap], to_observe: list[str]) -> str:
    """What would raise the level. A recorded hint that binds is never lifted, so the line says so from the start
    ("not possible after hint 2"), never a criterion to show that, once shown, leaves the level where it was."""
    pieces = []
    if level != LEVELS[-1]:
        hints = [cap.hint for cap in binding if cap.hint]
        fixes = list(dict.fromkeys(fix for cap in binding for fix in cap.fixes))
        fixes = [f"not possible after {_listed(hints, most=4)}"] if hints else fixes
        pieces.append(f"to reach {_word(LEVELS[level_rank(level) + 1])}: " + _listed(fixes))
    if to_observe:
        pieces.append(f"to confirm {_word(level)}, observe {', '.join(to_observe)}")
    return "; ".join(pieces)


def hygiene_line(checks: list[CheckResult]) -> str:
    """Substance and hygiene apart, so "correct but sloppy" reads differently from "wrong":
    "correct and efficient; hygiene missing: rejects_invalid_sizes"."""
    failed = [c for c in checks if not c.passed]
    kinds = {c.kind if c.kind in FAILURE_CAPS else "wrong" for c in failed}
    if any(FAILURE_CAPS[k] == "weak" for k in kinds):
        substance = "not correct"
    else:
        substance = "correct but wasteful" if "efficiency" in kinds else "correct and efficient"
    if "tests" in kinds:
        substance += "; own tests too weak"
    sloppy = [c.id for c in failed if c.kind == "hygiene"]
    return f"{substance}; " + (f"hygiene missing: {_listed(sloppy)}" if sloppy else "hygiene clean")


def _listed(items: list[str], most: int = 3) -> str:
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


def _word(level: str) -> str:
    return level.replace("_", " ")


# ---------------------------------------------------------------------------- structure

def structure_problems(rubric: Rubric, check_ids: set[str]) -> list[str]:
    """What breaks the calibration in a rubric, as sentences (empty when it is sound).

    A strong_hire automatic criterion declares the hire-capped kind it stands for, so no
    weak-class failure sits only there; a contract diagnosis caps at weak; every named
    check exists, and every check sits under some criterion (one under none would count for
    nothing but its failure kind's cap).
    """
    problems = [f"criterion {c.id} names unknown check {check}"
                for c in rubric.criteria for check in c.checks if check not in check_ids]
    placed = {check for c in rubric.criteria for check in c.checks}
    problems += [f"check {check} sits under no criterion" for check in sorted(set(check_ids) - placed)]
    problems += [f"strong_hire criterion {c.id} declares no kind (one of {', '.join(HIRE_CAPPED_KINDS)})"
                 for c in rubric.criteria if c.level == "strong_hire" and not c.observed and not c.kind]
    problems += [f"diagnosis {d.id} is the contract's, so it caps at weak, not {d.caps}"
                 for d in rubric.diagnoses if d.contract and d.caps != "weak"]
    return problems
