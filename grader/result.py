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
    own_tests: dict | None = None  # score, caught, missed, set_aside: see grader/own_tests.py

    @property
    def passed_checks(self) -> int:
        return sum(c.passed for c in self.checks)


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

    @property
    def overall_level(self) -> str | None:
        """The lowest level among attempted exercises: strong overall means strong on all asked.

        Exercises not attempted do not count against the candidate (an interview set may
        choose a few); a run where nothing was attempted has no level.
        """
        levels = [e.level for e in self.exercises if e.status != "not_attempted" and e.level]
        return min(levels, key=level_rank) if levels else None

    @property
    def score(self) -> float:
        """Fraction of checks passed over attempted exercises, for ranking within a level."""
        checks = [c for e in self.exercises if e.status != "not_attempted" for c in e.checks]
        return round(sum(c.passed for c in checks) / len(checks), 4) if checks else 0.0

    def exercise(self, exercise_id: str) -> ExerciseResult:
        return next(e for e in self.exercises if e.id == exercise_id)

    def to_dict(self) -> dict:
        return {
            "schema": self.schema,
            "seed": self.seed,
            "submission": self.submission,
            "overall": {"level": self.overall_level, "score": self.score},
            "isolation": self.isolation,
            "feedback": self.feedback,
            "kvgrade_version": self.kvgrade_version,
            "seconds": round(self.seconds, 3),
            "exercises": [asdict(e) for e in self.exercises],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Result":
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a kvgrade result (schema {data.get('schema')!r}, expected {SCHEMA!r})")
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
