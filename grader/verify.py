"""Self-check of the kit: rubrics follow the calibration, references reach strong_hire
(provisional, as no interviewer has observed anything), every known-wrong solution is caught.

A reference submission is a temporary folder with every ``solutions/<id>.py`` and the
reference's own tests; a mutant's submission is the same with the mutant swapped in (a file
mutant replaces the module; a folder mutant overlays its files).
"""
from __future__ import annotations

import functools
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
from .rubric import structure_problems


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


def judge_rubric(ex: Exercise) -> Outcome:
    """The rubric's structure against the calibration (no grading needed)."""
    problems = structure_problems(ex.rubric, ex.check_ids)
    return Outcome(ex.id, "rubric", not problems, "; ".join(problems) or "follows the calibration")


def misplaced_failures(ex: Exercise, result: ExerciseResult) -> list[str]:
    """Failing checks of a weak-class kind that sit only in strong_hire criteria, while every
    hire criterion is met: the rubric would then say hire about a wrong answer."""
    if any(c.status == "missed" and c.level == "hire" for c in result.criteria):
        return []
    by_check: dict[str, set[str]] = {}
    for c in ex.rubric.criteria:
        for check in c.checks:
            by_check.setdefault(check, set()).add(c.level)
    return [f"{c.id} failed as {c.kind} but sits only in strong_hire criteria" for c in result.checks
            if not c.passed and FAILURE_CAPS.get(c.kind or "wrong") == "weak"
            and by_check.get(c.id) == {"strong_hire"}]


def judge_reference(ex: Exercise, result: ExerciseResult) -> Outcome:
    failing = [c.id for c in result.checks if not c.passed]
    ok = result.level == "strong_hire" and result.provisional == any(
        c.kind == "observed" for c in result.criteria) and not failing and not result.diagnoses
    detail = (f"{result.status}, level {result.level}" + (" (provisional)" if result.provisional else "")
              + (f", failing {failing}" if failing else "")
              + (f", diagnosed {[d.id for d in result.diagnoses]}" if result.diagnoses else "")
              + (f": {result.error}" if result.error else ""))
    return Outcome(ex.id, "reference", ok, detail)


def judge_mutant(ex: Exercise, mutant: Mutant, result: ExerciseResult) -> Outcome:
    drawn = [d.id for d in result.diagnoses]
    cap = ex.rubric.diagnosis(mutant.expected_diagnosis).caps
    misplaced = misplaced_failures(ex, result)
    ok = (result.status == "graded" and mutant.expected_diagnosis in drawn
          and level_rank(result.level) <= level_rank(cap) and not misplaced)
    detail = f"expects {mutant.expected_diagnosis} (cap {cap}); got level {result.level}, diagnoses {drawn}"
    if result.error:
        detail += f": {result.error}"
    if misplaced:
        detail += "; rubric: " + "; ".join(misplaced)
    return Outcome(ex.id, mutant.name, ok, detail)


def verify(exercise_ids: list[str] | None = None, seed: int = 0, jobs: int | None = None):
    """Yield one Outcome per rubric, reference and mutant, in catalog order.

    All subjects of all chosen exercises share one pool of worker processes (one per core):
    grading is CPU-bound, and a worker that dies is one failed outcome, never a stopped run.
    """
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    subjects = [(ex.id, None) for ex in chosen] + [(ex.id, m.name) for ex in chosen for m in ex.mutants]
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(subjects)))
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state shared with ours
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {subject: pool.submit(judge, *subject, seed) for subject in subjects}
        for ex in chosen:
            yield judge_rubric(ex)
            for name in [None, *(m.name for m in ex.mutants)]:
                try:
                    yield futures[ex.id, name].result()
                except Exception as exc:  # noqa: BLE001  the worker died: report it, go on
                    yield Outcome(ex.id, name or "reference", False, f"grading failed: {type(exc).__name__}: {exc}")


@functools.lru_cache(maxsize=4)
def outcomes(seed: int = 0) -> tuple[Outcome, ...]:
    """Every outcome of one verify run over the whole kit, kept for this process: tests
    parametrize over it instead of starting a pool per exercise."""
    return tuple(verify(seed=seed))


def judge(exercise_id: str, mutant_name: str | None, seed: int) -> Outcome:
    """Grade the reference (mutant_name None) or one mutant of an exercise, and judge it."""
    ex = catalog.get(exercise_id)
    with tempfile.TemporaryDirectory(prefix="kvgrade-verify-") as tmp:
        if mutant_name is None:
            result = engine.grade(reference_submission(Path(tmp)), [ex.id], seed=seed, blame_reference=False)
            return judge_reference(ex, result.exercise(ex.id))
        mutant = next(m for m in ex.mutants if m.name == mutant_name)
        result = engine.grade(mutant_submission(mutant, Path(tmp)), [ex.id], seed=seed)
        return judge_mutant(ex, mutant, result.exercise(ex.id))
