"""Self-check of the kit: references reach strong_hire, every known-wrong solution is caught.

A reference submission is a temporary folder with every ``solutions/<id>.py`` and the
reference's own tests; a mutant's submission is the same with the mutant swapped in (a file
mutant replaces the module; a folder mutant overlays its files).
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import catalog, engine
from .catalog import Exercise, Mutant
from .result import ExerciseResult, level_rank
from .rubric import diagnosis_cap


@dataclass
class Outcome:
    exercise: str
    subject: str  # "reference" or the mutant's name
    ok: bool
    line: str


def reference_submission(into: Path) -> Path:
    for ex in catalog.exercises():
        if ex.reference_path.exists():
            shutil.copyfile(ex.reference_path, into / ex.reference_path.name)
        own = ex.reference_path.with_name(f"test_{ex.id}.py")
        if own.exists():
            shutil.copyfile(own, into / own.name)
    return into


def mutant_submission(mutant: Mutant, into: Path) -> Path:
    reference_submission(into)
    if mutant.path.is_dir():
        for f in mutant.path.glob("*.py"):
            shutil.copyfile(f, into / f.name)
    else:
        shutil.copyfile(mutant.path, into / f"{mutant.exercise}.py")
    return into


def judge_reference(ex: Exercise, result: ExerciseResult) -> Outcome:
    failing = [c.id for c in result.checks if not c.passed]
    ok = result.level == "strong_hire" and not failing and not result.diagnoses
    detail = (f"{result.status}, level {result.level}"
              + (f", failing {failing}" if failing else "")
              + (f", diagnosed {[d.id for d in result.diagnoses]}" if result.diagnoses else "")
              + (f": {result.error}" if result.error else ""))
    return Outcome(ex.id, "reference", ok, detail)


def judge_mutant(ex: Exercise, mutant: Mutant, result: ExerciseResult) -> Outcome:
    drawn = [d.id for d in result.diagnoses]
    cap, _ = diagnosis_cap(ex.rubric, mutant.expected_diagnosis)
    ok = (result.status == "graded" and mutant.expected_diagnosis in drawn
          and level_rank(result.level) <= level_rank(cap))
    detail = f"expects {mutant.expected_diagnosis} (cap {cap}); got level {result.level}, diagnoses {drawn}"
    if result.error:
        detail += f": {result.error}"
    return Outcome(ex.id, mutant.name, ok, detail)


def verify(exercise_ids: list[str] | None = None, seed: int = 0, progress=None):
    """Yield one Outcome per reference and per mutant."""
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    with tempfile.TemporaryDirectory(prefix="kvgrade-verify-") as tmp:
        ref = Path(tmp) / "reference"
        ref.mkdir()
        result = engine.grade(reference_submission(ref), [e.id for e in chosen], seed=seed)
        for ex in chosen:
            yield judge_reference(ex, result.exercise(ex.id))
        for ex in chosen:
            for mutant in ex.mutants:
                folder = Path(tmp) / f"{ex.id}-{mutant.name}"
                folder.mkdir()
                graded = engine.grade(mutant_submission(mutant, folder), [ex.id], seed=seed)
                yield judge_mutant(ex, mutant, graded.exercise(ex.id))
