"""The result of one grading run: one model that every renderer reads and none recomputes.

``Result.to_dict()`` is the contract JSON (schema ``kvgrade.result/1``) plus extra fields;
``Result.from_dict()`` reads it back, so reports can be re-rendered from a saved file.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

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


@dataclass
class CheckResult:
    id: str
    passed: bool
    message: str = ""
    description: str = ""  # what the check tries, in words safe to show a candidate
    case: dict | None = None  # what was tried when it failed (shape, seed): enough to reproduce
    picture: dict | None = None  # a small failing case to draw: see grader/pictures.py
    seconds: float = 0.0
    kind: str | None = None  # for a failure: one of FAILURE_KINDS


@dataclass
class Diagnosis:
    id: str
    message: str
    caps: str = "weak"  # the highest level reachable with this mistake
    explain: str = ""  # the rubric's general explanation of the mistake


@dataclass
class Criterion:
    id: str
    level: str
    text: str
    kind: str  # "check": automatic, from check ids; "observed": recorded by the interviewer
    status: str  # "met" | "missed" | "to_observe"
    checks: list = field(default_factory=list)


@dataclass
class ExerciseResult:
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


@dataclass
class Result:
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
            "overall": {"level": self.overall_level, "provisional": self.overall_provisional,
                        "to_observe": self.overall_to_observe, "score": self.score},
            "isolation": self.isolation,
            "bounds": self.bounds,
            "skipped_links": self.skipped_links,
            "feedback": self.feedback,
            "kvgrade_version": self.kvgrade_version,
            "seconds": round(self.seconds, 3),
            "exercises": [asdict(e) for e in self.exercises],
            "session": self.session,
            **({"levels_hidden": True} if self.levels_hidden else {}),
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
            e["criteria"] = [Criterion(**_known(Criterion, c)) for c in e.get("criteria", [])]
            exercises.append(ExerciseResult(**e))
        top = _known(cls, data)
        top["exercises"] = exercises
        return cls(**top)


def _known(kind, data: dict) -> dict:
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in data.items() if k in names}


_TOP_FIELDS = {"seed": int, "submission": str, "exercises": list}
_EXERCISE_FIELDS = {"id": str, "status": str}
_PART_FIELDS = {  # the lists inside an exercise, and what each of their entries must hold
    "checks": {"id": str, "passed": bool},
    "diagnoses": {"id": str, "message": str},
    "criteria": {"id": str, "level": str, "text": str, "kind": str, "status": str},
}


def schema_problem(data) -> str | None:
    """The first way ``data`` (parsed JSON) fails to be a saved result, or None when it is one."""
    if not isinstance(data, dict):
        return f"the top level is {type(data).__name__}, not an object"
    if data.get("schema") != SCHEMA:
        return f"schema {data.get('schema')!r}, expected {SCHEMA!r}"
    problems = (_object_problem(e, _EXERCISE_FIELDS, f"exercises[{i}]") or _parts_problem(e, f"exercises[{i}]")
                for i, e in enumerate(data.get("exercises", [])))
    return _fields_problem(data, _TOP_FIELDS, "result") or next(filter(None, problems), None)


def _parts_problem(exercise: dict, where: str) -> str | None:
    for part, expected in _PART_FIELDS.items():
        entries = exercise.get(part, [])
        if not isinstance(entries, list):
            return f"{where}.{part} is {type(entries).__name__}, not list"
        for j, entry in enumerate(entries):
            problem = _object_problem(entry, expected, f"{where}.{part}[{j}]")
            if problem:
                return problem
    return None


def _object_problem(value, expected: dict, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}, not an object"
    return _fields_problem(value, expected, where)


def _fields_problem(data: dict, expected: dict, where: str) -> str | None:
    for name, kind in expected.items():
        if name not in data:
            return f"{where} has no {name!r}"
        if not isinstance(data[name], kind) or (kind is int and isinstance(data[name], bool)):
            return f"{where}.{name} is {type(data[name]).__name__}, not {kind.__name__}"
    return None
