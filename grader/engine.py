"""One grading run: submission -> sandbox -> hidden checks -> diagnoses -> rubric -> result.

Who is to blame, and what counts:

- Without ``exercise_ids`` (self-study) an exercise not attempted (no module, or every
  function still raising NotImplementedError) is listed and not counted. With them (an
  interview set) each chosen exercise is required: not attempted is weak, scoring 0.
- The candidate's code failing is the candidate's: an import error, a crash, a reply the
  grader cannot use are status error, level weak, counted.
- An exception a check did not expect (not a ``CheckFailure``), a check module that fails to
  load, or no check running at all, is blamed by re-running the same checks on the reference
  solution (``blame_reference``): if the reference breaks them too, the kit is at fault and
  the exercise has no verdict (``kit_error``; the overall level is null, never higher).
  Otherwise the candidate's data broke the grader's handling: status error, level weak.
"""
from __future__ import annotations

import secrets
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pytest

from . import __version__, catalog, interruption, interview, own_tests
from .catalog import Exercise
from .checking import ExerciseRun
from .notes import Notes, NotesError
from .plugin import CollectChecks, check_id
from .result import CheckResult, ExerciseResult, Result, neutralized
from .rubric import judge
from .sandbox import CandidateFault, Limits, ModuleToLoad, Sandbox, isolation_report
from .sandbox.client import close_all
from .submission import Refused, candidate_files, locate, open_submission, shown_path, skipped_links

SEED_BOUND = 1 << 32  # fresh seeds are below this: too many to tabulate answers for, short in a rerun line


def fresh_seed() -> int:
    """A seed nobody can predict, for a grading given none: hidden inputs are a pure function of
    the seed, so a fixed default would let a table of answers recorded at it pass."""
    return secrets.randbelow(SEED_BOUND)


def grade(submission: str | Path, exercise_ids: list[str] | None = None, seed: int | None = None,
          notes: Notes | None = None, only_checks: set[str] | None = None,
          limits: Limits | None = None, progress=None, blame_reference: bool = True, live: bool = False) -> Result:
    """Grade a submission folder or .zip. Unknown exercise ids raise KeyError; a bad folder, SubmissionError.
    Every string of the result is neutralised here, where candidate text enters (``render.common``).

    ``seed`` None draws a fresh one (:func:`fresh_seed`); the result records it, so the grading
    can be replayed.

    ``blame_reference``: re-run checks that broke unexpectedly on the reference, to tell the
    kit's faults from the candidate's (off when grading the reference itself). ``live``: the
    interviewer's side says the grading is live (never a file in the submission); validation
    beyond the prompt's cases is then observed, not automatic (rubrics/README.md).
    """
    seed = fresh_seed() if seed is None else seed
    # a folder or a .zip, read safely; its errors name the interview set's ids
    with interruption.ended_by_signals(), open_submission(submission, exercise_ids) as root:
        result = _grade_root(root, submission, exercise_ids, seed, notes, only_checks, limits,
                             progress, blame_reference, live)
    return neutralized(result)  # candidate text enters here: made safe once, before any caller sees it


def _grade_root(root: Path, submission, exercise_ids, seed, notes, only_checks, limits, progress,
                blame_reference, live=False) -> Result:
    started = time.perf_counter()
    limits = limits or Limits()
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    modules = {e.id: locate(root, e.id) for e in catalog.exercises()}
    found = {e.id: modules[e.id] for e in chosen if modules[e.id] is not None}

    runs = {eid: _prepare(catalog.get(eid), path, modules, seed, limits, root)
            for eid, path in found.items()}
    bounds = isolation_report(limits)  # the level is probed once per process, then cached
    try:
        _start_all(runs)
        collected = _run_checks(runs, only_checks, progress, own_tests_stage=False)
    finally:
        close_all([run.sandbox for run in runs.values()])  # every child asked to exit before any is waited for
    interruption.stop_if_signalled()
    _run_own_tests(runs, limits, only_checks)  # no candidate child of this submission is alive now
    interruption.stop_if_signalled()
    _run_checks(runs, only_checks, progress, own_tests_stage=True, plugin=collected)
    facts = {e.id: _facts(runs.get(e.id), collected) for e in chosen}
    if blame_reference:
        _blame(facts, seed, limits)
    else:
        for f in facts.values():
            f.reference_shows_unexpected = bool(f.unexpected)
    exercises = [build_result(e, facts[e.id], bool(exercise_ids), notes, live) for e in chosen]
    for e in exercises:  # the path inside the submission as given, never an unpacked temporary folder
        e.module = e.module and shown_path(Path(e.module), root, submission)
    return Result(seed=seed, submission=str(submission), submission_name=Path(submission).resolve().name,
                  exercises=exercises, isolation=bounds["level"],
                  bounds=bounds, skipped_links=skipped_links(root), live=live,
                  kvgrade_version=__version__, seconds=time.perf_counter() - started)


def _prepare(exercise: Exercise, module: Path, modules, seed, limits, root: Path) -> ExerciseRun:
    others = {eid: p for eid, p in modules.items() if p is not None and eid != exercise.id}
    try:  # a link or non-regular file where a module is read refuses the exercise
        files, refused = candidate_files(module, others, root), None
    except Refused as exc:
        files, refused = [], str(exc)
    spec = ModuleToLoad(exercise.id, files, exercise.helper_files, refused, seed)
    return ExerciseRun(exercise, seed, Sandbox(spec, limits), module)


def _run_own_tests(runs: dict[str, ExerciseRun], limits: Limits, only_checks: set[str] | None):
    """Run the candidate's own tests the rubrics declare, one exercise at a time.

    Only once every candidate child of the submission has ended: an own-tests run holds a
    proxy to the reference, and candidate code alive beside it could relay the proxy's answers
    through any kernel-wide channel (file locks on a shared file, IPC) that no namespace closes.
    """
    if only_checks is not None and not any(c.startswith(own_tests.CHECK_PREFIX) for c in only_checks):
        return
    for run in runs.values():
        if run.sandbox.load_error or run.own_tests_path is None or not own_tests.judgeable(run.exercise):
            continue
        run.own_tests = own_tests.run_all(run.exercise, run.own_tests_path, run.sandbox, limits, run.seed,
                                          before_each=interruption.stop_if_signalled)


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


def _run_checks(runs: dict[str, ExerciseRun], only, progress, own_tests_stage: bool,
                plugin: CollectChecks | None = None) -> CollectChecks:
    """Run one stage of the hidden checks into ``plugin``: the checks calling candidate code, or
    (``own_tests_stage``) those judging the candidate's own tests."""
    plugin = plugin or CollectChecks(runs, only, progress)
    paths = [str(r.exercise.hidden_checks) for r in runs.values() if not r.sandbox.load_error
             and (not own_tests_stage or own_tests.judgeable(r.exercise))]
    if paths:
        ini = str(catalog.HIDDEN_ROOT / "pytest.ini")
        # No plugin installed beside the kit runs with the hidden checks: one that reorders tests or
        # reseeds generators (pytest-randomly) would change verdicts, and loading them costs time.
        # unraisableexception turns exceptions no code can catch into warnings no one reads here (no
        # terminal), and ends the session with five full garbage collections of the grader (50-70 ms).
        args = ["-c", ini, "--rootdir", str(catalog.HIDDEN_ROOT), "--disable-plugin-autoload", "-p", "no:terminal",
                "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "no:unraisableexception", "--assert=plain",
                *paths]
        code = pytest.main(args, plugins=[plugin, _Stage(own_tests_stage)])
        if code == pytest.ExitCode.INTERRUPTED:  # pytest caught our KeyboardInterrupt: end the grading
            raise KeyboardInterrupt
        if code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
            raise RuntimeError(f"the grader's pytest run failed to start (exit {int(code)})")
    return plugin


class _Stage:
    """Keeps the checks of one stage: those judging own tests, or all the others."""

    def __init__(self, own_tests_stage: bool):
        self.own_tests_stage = own_tests_stage

    @pytest.hookimpl(trylast=True)  # after the plugin adds the general checks, which belong to the first stage
    def pytest_collection_modifyitems(self, items, config):
        keep = [i for i in items if check_id(i).startswith(own_tests.CHECK_PREFIX) == self.own_tests_stage]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def _blame(facts: dict[str, ExerciseFacts], seed: int, limits: Limits):
    """For each exercise whose checks broke unexpectedly, grade the reference on those checks."""
    for eid, f in facts.items():
        if not f.unexpected or f.load_error:
            continue
        if not catalog.get(eid).reference_path.is_file():  # a grader-only build: nobody to compare with
            f.reference_shows_unexpected = f.blame_unknown = True
            continue
        broken = {c.id for c in f.checks if not c.passed and c.kind is None} or None
        with tempfile.TemporaryDirectory(prefix="kvgrade-blame-") as tmp:
            reference = grade(catalog.reference_submission(Path(tmp)), [eid], seed=seed, only_checks=broken,
                              limits=limits, blame_reference=False).exercise(eid)
        f.reference_shows_unexpected = reference.kit_error or reference.status != "graded"  # the kit's either way


@dataclass
class ExerciseFacts:
    """What the collectors reported about one exercise; the result is built from these alone."""
    module: Path | None = None  # None: no module found
    load_error: str | None = None  # the sandbox: the candidate's module failed to import
    attempted: bool = True  # the sandbox: some function did more than raise NotImplementedError
    checks: list[CheckResult] = field(default_factory=list)  # the plugin
    diagnoses: list[tuple[str, str]] = field(default_factory=list)  # (id, concrete sentence)
    unexpected: list[str] = field(default_factory=list)  # the plugin: errors no check expected
    reference_shows_unexpected: bool = False  # the same checks broke on the reference too
    blame_unknown: bool = False  # ... or could not be run there: this build holds no reference
    own_tests: dict | None = None  # the own-tests stage: score, caught, missed, set_aside (None: not run)
    output_note: str | None = None  # the sandbox: the child printed past the output cap


def _facts(run: ExerciseRun | None, collected: CollectChecks) -> ExerciseFacts:
    if run is None:
        return ExerciseFacts()
    sandbox, eid = run.sandbox, run.exercise.id
    if sandbox.load_error:
        return ExerciseFacts(run.module_path, load_error=sandbox.load_error, output_note=sandbox.output_note)
    rank = {check: n for n, check in enumerate(run.exercise.checks)}  # `show --checks`' order, whatever the stage
    checks = sorted(collected.results[eid], key=lambda c: rank.get(c.id, len(rank)))
    unexpected = list(collected.kit_errors[eid]) or ([] if checks else ["no hidden check ran"])
    return ExerciseFacts(run.module_path, attempted=not (sandbox.calls_ok == 0 and sandbox.calls_not_implemented > 0),
                         checks=checks, diagnoses=[(d.id, d.message) for d in run.diagnoses.values()],
                         unexpected=unexpected, own_tests=own_tests.summary(run.exercise, run.own_tests),
                         output_note=sandbox.output_note)


def build_result(exercise: Exercise, facts: ExerciseFacts, required: bool,
                 notes: Notes | None = None, live: bool = False) -> ExerciseResult:
    """One exercise's result from the facts, in one pure step (see ``grade`` for the rules)."""
    rubric = own_tests.rubric_for(exercise)  # the kit's, less what a grader-only build cannot judge
    result = ExerciseResult(exercise.id, "not_attempted", title=exercise.title, required=required,
                            follow_ups=[asdict(f) for f in rubric.follow_ups],
                            module=str(facts.module) if facts.module else None,
                            notes=notes.text(exercise.id) if notes else "",
                            about=rubric.summary, level_guide=dict(rubric.levels),
                            hints_offered=len(rubric.hints), interviewer=interview.sheet(exercise),
                            hints_given=[i + 1 for i in notes.hints(exercise.id)] if notes else [],
                            output_note=facts.output_note,
                            rubric=own_tests.judged_record(exercise))
    if facts.module is None or not facts.attempted:
        result.error = "no module found" if facts.module is None else "every function still raises NotImplementedError"
        if required:
            result.level, result.reason = "weak", "weak: chosen for the interview set and not attempted"
        return result
    if facts.load_error:
        result.status, result.level, result.error = "error", "weak", facts.load_error
        result.reason = "weak: the candidate's module failed to load"
        return result
    if facts.unexpected:
        result.status, result.checks = "error", facts.checks
        if facts.reference_shows_unexpected:
            result.kit_error, result.error = True, "grader error: " + facts.unexpected[0]
            result.reason = ("no level: this grader-only build has no reference solution to tell the kit's fault "
                             "from the candidate's" if facts.blame_unknown
                             else "no level: the kit failed on the reference solution too")
        else:
            result.level = "weak"
            result.error = "the candidate's code broke the grader's handling: " + facts.unexpected[0]
            result.reason = "weak: the candidate's code sent back something the grader could not use"
        return result
    result.status, result.checks = "graded", facts.checks
    result.diagnoses = [rubric.make_diagnosis(did, message) for did, message in facts.diagnoses]
    result.own_tests = facts.own_tests
    result.seconds = round(sum(c.seconds for c in facts.checks), 3)
    observed = notes.observed(exercise.id) if notes else {}
    hints = notes.hints(exercise.id) if notes else ()
    try:
        return result.judged(judge(rubric, result.checks, result.diagnoses, observed, hints, live=live))
    except ValueError as exc:  # a hint number the rubric does not have
        raise NotesError(f"notes for [{exercise.id}]: {exc}") from None
