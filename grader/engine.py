"""One grading run: submission -> sandbox -> hidden checks -> diagnoses -> rubric -> result."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from . import __version__, catalog, own_tests, rubric
from .catalog import Exercise
from .checking import ExerciseRun
from .notes import Notes
from .plugin import CollectChecks
from .result import ExerciseResult, Result
from .sandbox import CandidateFault, Limits, ModuleToLoad, Sandbox
from .sandbox.launch import isolation_level
from .submission import candidate_files, check_root, locate

OWN_TESTS_WORKERS = 2  # own-test runs at once (each is a tests process and an implementation process)


def grade(submission: str | Path, exercise_ids: list[str] | None = None, seed: int = 0,
          notes: Notes | None = None, only_checks: set[str] | None = None,
          limits: Limits | None = None, progress=None) -> Result:
    """Grade a submission folder. Unknown exercise ids raise KeyError; a bad folder, SubmissionError."""
    started = time.perf_counter()
    root = check_root(Path(submission))
    limits = limits or Limits()
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    modules = {e.id: locate(root, e.id) for e in catalog.exercises()}
    found = {e.id: modules[e.id] for e in chosen if modules[e.id] is not None}

    runs = {eid: _prepare(catalog.get(eid), path, modules, seed, limits)
            for eid, path in found.items()}
    isolation = isolation_level(limits)  # probed once per process, then cached
    _start_all(runs)
    own_tests_pool = ThreadPoolExecutor(max_workers=OWN_TESTS_WORKERS, thread_name_prefix="own-tests")
    try:
        for run in runs.values():
            _start_own_tests(run, own_tests_pool, limits, only_checks)
        collected = _run_checks(runs, only_checks, progress)
        exercises = [_exercise_result(e, runs.get(e.id), collected, notes) for e in chosen]
    finally:
        own_tests_pool.shutdown(wait=True, cancel_futures=True)
        for run in runs.values():
            run.sandbox.close()
    return Result(seed=seed, submission=str(submission), exercises=exercises, isolation=isolation,
                  kvgrade_version=__version__, seconds=time.perf_counter() - started)


def _prepare(exercise: Exercise, module: Path, modules, seed, limits) -> ExerciseRun:
    others = {eid: p for eid, p in modules.items() if p is not None and eid != exercise.id}
    spec = ModuleToLoad(exercise.id, candidate_files(module, others), exercise.helper_files)
    return ExerciseRun(exercise, seed, Sandbox(spec, limits), module)


def _start_own_tests(run: ExerciseRun, pool, limits: Limits, only_checks: set[str] | None):
    """Start the runs of the candidate's own tests the rubric declares, beside the checks."""
    if run.sandbox.load_error or run.own_tests_path is None or own_tests.declaration(run.exercise) is None:
        return
    if only_checks is not None and not any(c.startswith(own_tests.CHECK_PREFIX) for c in only_checks):
        return
    run.own_tests = own_tests.schedule(pool, run.exercise, run.own_tests_path, run.sandbox, limits)


def _start_all(runs: dict[str, ExerciseRun]):
    """Start every child at once, so imports overlap, then wait for each import in turn.

    All from this thread: a sandboxed child dies with the thread that started it.
    """
    for run in runs.values():
        try:
            run.sandbox.launch()
        except CandidateFault:
            pass
    for run in runs.values():
        try:
            run.sandbox.start()
        except CandidateFault:
            pass  # kept in sandbox.load_error and reported as the exercise's error


def _run_checks(runs: dict[str, ExerciseRun], only, progress) -> CollectChecks:
    plugin = CollectChecks(runs, only, progress)
    paths = [str(r.exercise.hidden_checks) for r in runs.values() if not r.sandbox.load_error]
    if paths:
        ini = str(catalog.HIDDEN_ROOT / "pytest.ini")
        args = ["-c", ini, "--rootdir", str(catalog.HIDDEN_ROOT), "-p", "no:terminal",
                "-p", "no:cacheprovider", "-p", "no:stepwise", "--assert=plain", *paths]
        code = pytest.main(args, plugins=[plugin])
        if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            raise RuntimeError(f"the grader's pytest run failed to start (exit {int(code)})")
    return plugin


def _exercise_result(exercise: Exercise, run: ExerciseRun | None, collected: CollectChecks,
                     notes: Notes | None) -> ExerciseResult:
    result = ExerciseResult(exercise.id, "not_attempted", title=exercise.title,
                            follow_ups=list(exercise.rubric.get("follow_ups", [])))
    if run is None:
        result.error = "no module found"
        return result
    result.module = str(run.module_path)
    sandbox = run.sandbox
    if sandbox.load_error:
        result.status, result.level, result.error = "error", "weak", sandbox.load_error
        return result
    if sandbox.calls_ok == 0 and sandbox.calls_not_implemented > 0:
        result.error = "every function still raises NotImplementedError"
        return result
    result.checks = collected.results[exercise.id]
    if not result.checks and not collected.kit_errors[exercise.id]:
        collected.kit_errors[exercise.id].append("no hidden check ran")
    if collected.kit_errors[exercise.id]:
        result.status, result.error = "error", "grader error: " + collected.kit_errors[exercise.id][0]
        return result
    for d in run.diagnoses.values():
        d.caps, d.explain = rubric.diagnosis_cap(exercise.rubric, d.id)
    result.diagnoses = list(run.diagnoses.values())
    result.own_tests = own_tests.summary(exercise, run.own_tests)
    observed = notes.observed(exercise.id) if notes else {}
    result.notes = notes.text(exercise.id) if notes else ""
    result.criteria = rubric.criteria(exercise.rubric, {c.id: c.passed for c in result.checks}, observed)
    result.status = "graded"
    result.level = rubric.level(result.criteria, result.diagnoses)
    result.seconds = round(sum(c.seconds for c in result.checks), 3)
    return result
