"""Self-check of the kit: references reach strong_hire, every known-wrong solution is caught.

A reference submission is a temporary folder with every ``solutions/<id>.py`` and the
reference's own tests; a mutant's submission is the same with the mutant swapped in (a file
mutant replaces the module; a folder mutant overlays its files).
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import catalog, engine
from .catalog import Exercise, Mutant
from .result import FAILURE_CAPS, ExerciseResult, level_rank
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


def kind_capped_level(result: ExerciseResult) -> str | None:
    """The level once every failing check's kind caps it (result.FAILURE_CAPS), whichever
    criterion the check sits in: what a level means, and what the levels rework computes."""
    caps = [FAILURE_CAPS[c.kind] for c in result.checks if not c.passed and c.kind in FAILURE_CAPS]
    return min([result.level, *caps], key=level_rank) if result.level else result.level


def judge_mutant(ex: Exercise, mutant: Mutant, result: ExerciseResult) -> Outcome:
    drawn = [d.id for d in result.diagnoses]
    expected = mutant.expected_diagnoses
    cap = mutant.expected_level or min((diagnosis_cap(ex.rubric, d)[0] for d in expected), key=level_rank,
                                       default="weak")
    named_right = all(d in drawn for d in expected) if expected else not drawn  # none: nothing misnamed
    level = kind_capped_level(result)
    ok = result.status == "graded" and named_right and level_rank(level) <= level_rank(cap)
    detail = f"expects {', '.join(expected) or 'no diagnosis'} (cap {cap}); got level {level}, diagnoses {drawn}"
    if result.error:
        detail += f": {result.error}"
    return Outcome(ex.id, mutant.name, ok, detail)


def variant_submission(path: Path, exercise_id: str, into: Path) -> Path:
    reference_submission(into)
    shutil.copyfile(path, into / f"{exercise_id}.py")
    return into


def judge_variant(ex: Exercise, name: str, result: ExerciseResult) -> Outcome:
    """A correct answer written differently must reach hire or better, with nothing diagnosed."""
    failing = [c.id for c in result.checks if not c.passed]
    level = kind_capped_level(result)
    ok = level_rank(level) >= level_rank("hire") and not result.diagnoses
    detail = (f"correct variant: {result.status}, level {level}"
              + (f", failing {failing}" if failing else "")
              + (f", diagnosed {[d.id for d in result.diagnoses]}" if result.diagnoses else ""))
    return Outcome(ex.id, f"variant:{name}", ok, detail)


def verify(exercise_ids: list[str] | None = None, seed: int = 0, jobs: int | None = None):
    """Yield one Outcome per reference and per mutant, in catalog order.

    Each subject is graded in a worker process (one per core): grading is CPU-bound, and a
    worker that dies is one failed outcome, never a stopped run.
    """
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    subjects = ([(ex.id, None) for ex in chosen] + [(ex.id, m.name) for ex in chosen for m in ex.mutants]
                + [(ex.id, f"variant:{p.stem}") for ex in chosen for p in ex.correct_variants])
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(subjects)))
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state shared with ours
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(judge, eid, name, seed) for eid, name in subjects]
        for (eid, name), future in zip(subjects, futures):
            try:
                yield future.result()
            except Exception as exc:  # noqa: BLE001  the worker died: report it, go on
                yield Outcome(eid, name or "reference", False, f"grading failed: {type(exc).__name__}: {exc}")


def judge(exercise_id: str, mutant_name: str | None, seed: int) -> Outcome:
    """Grade the reference (mutant_name None) or one mutant of an exercise, and judge it."""
    ex = catalog.get(exercise_id)
    with tempfile.TemporaryDirectory(prefix="kvgrade-verify-") as tmp:
        if mutant_name is None:
            result = engine.grade(reference_submission(Path(tmp)), [ex.id], seed=seed)
            return judge_reference(ex, result.exercise(ex.id))
        if mutant_name.startswith("variant:"):
            path = next(p for p in ex.correct_variants if p.stem == mutant_name.split(":", 1)[1])
            result = engine.grade(variant_submission(path, ex.id, Path(tmp)), [ex.id], seed=seed)
            return judge_variant(ex, path.stem, result.exercise(ex.id))
        mutant = next(m for m in ex.mutants if m.name == mutant_name)
        result = engine.grade(mutant_submission(mutant, Path(tmp)), [ex.id], seed=seed)
        return judge_mutant(ex, mutant, result.exercise(ex.id))
