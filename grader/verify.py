"""Self-check of the kit: rubrics follow the calibration, references reach strong_hire
(provisional, as no interviewer has observed anything), every known-wrong solution is caught,
every correct answer written differently passes.

A reference submission is a temporary folder with every ``solutions/<id>.py`` and the
reference's own tests; a mutant's submission is the same with the mutant swapped in (a file
mutant replaces the module; a folder mutant overlays its files); a correct variant's
(``solutions/variants/<id>/*.py``) is the same with the variant as the module.

A mutant says ``EXPECTED_DIAGNOSIS``: one id, a tuple (it has several mistakes and must draw
every one), or () (a mistake no diagnosis may name: nothing is drawn, and ``EXPECTED_LEVEL``,
"weak" or "hire", is the level it must not exceed). Otherwise the cap is the lowest of its
diagnoses' caps, or ``EXPECTED_LEVEL`` when it states one.

A correct variant must reach hire or better and draw no contract diagnosis. A variant may draw
a diagnosis the rubric caps at hire or above (e.g. an efficiency mistake such as a cache copied
at every step: right answers, wasteful): it must then say ``EXPECTED_LEVEL``. When a variant
states ``EXPECTED_LEVEL``, its judged level must be exactly that. A variant that states
``EXPECTED_LIVE_LEVEL`` is graded a second time ``live`` (the interviewer's side says so), and
must reach exactly that level there, provisionally (validation beyond the prompt's shown cases
is then observed, not checked).
"""
from __future__ import annotations

import functools
import multiprocessing
import os
import shutil
import signal
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from . import catalog, engine, interruption, own_tests
from .catalog import Exercise, Mutant, module_constant, reference_submission
from .result import FAILURE_CAPS, ExerciseResult, level_rank
from .rubric import structure_problems


@dataclass
class Outcome:
    exercise: str
    subject: str  # "reference", "rubric", the mutant's name or "variant:<name>"
    ok: bool
    line: str
    failing: tuple[str, ...] = ()  # the checks that failed: the diagnosis-stability test reruns these
    diagnoses: tuple[str, ...] = ()  # the mistakes they named (sorted): what other seeds must name too


def failing_checks(result: ExerciseResult) -> tuple[str, ...]:
    return tuple(sorted(c.id for c in result.checks if not c.passed))


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
    expected = mutant.expected_diagnoses
    cap = mutant.expected_level or min((ex.rubric.diagnosis(d).caps for d in expected), key=level_rank,
                                       default="weak")
    named_right = all(d in drawn for d in expected) if expected else not drawn  # none: nothing misnamed
    misplaced = misplaced_failures(ex, result)
    ok = (result.status == "graded" and named_right
          and level_rank(result.level) <= level_rank(cap) and not misplaced)
    detail = (f"expects {', '.join(expected) or 'no diagnosis'} (cap {cap}); "
              f"got level {result.level}, diagnoses {drawn}")
    if result.error:
        detail += f": {result.error}"
    if misplaced:
        detail += "; rubric: " + "; ".join(misplaced)
    return Outcome(ex.id, mutant.name, ok, detail, failing_checks(result), tuple(sorted(drawn)))


def variant_submission(path: Path, exercise_id: str, into: Path) -> Path:
    reference_submission(into)
    shutil.copyfile(path, into / f"{exercise_id}.py")
    return into


def judge_variant(ex: Exercise, path: Path, result: ExerciseResult) -> Outcome:
    """A correct answer written differently: hire or better, no contract diagnosis, a drawn
    (hire-capped) diagnosis only when it states its level, and exactly the level it states."""
    failing = [c.id for c in result.checks if not c.passed]
    drawn = [d.id for d in result.diagnoses]
    rules = [ex.rubric.diagnosis(d) for d in drawn]
    stated = module_constant(path, "EXPECTED_LEVEL")
    wrong = [r.id for r in rules if r.contract or level_rank(r.caps) < level_rank("hire")]
    ok = (result.status == "graded" and level_rank(result.level) >= level_rank("hire") and not wrong
          and (stated is not None or not drawn) and (stated is None or result.level == stated))
    detail = (f"correct variant: {result.status}, level {result.level}"
              + (f" (expects {stated})" if stated else "")
              + (f", failing {failing}" if failing else "")
              + (f", diagnosed {drawn}" if drawn else "")
              + (f" (contract or below hire: {wrong})" if wrong else "")
              + ("; a drawn diagnosis needs EXPECTED_LEVEL" if drawn and stated is None else "")
              + (f": {result.error}" if result.error else ""))
    return Outcome(ex.id, f"variant:{path.stem}", ok, detail)


def judge_live_variant(ex: Exercise, path: Path, stated: str, result, take_home: Outcome) -> Outcome:
    """The same correct variant graded live: exactly ``stated``, provisional when strong_hire."""
    graded = result.exercise(ex.id)
    ok = graded.status == "graded" and graded.level == stated and (stated != "strong_hire" or graded.provisional)
    detail = (f"{take_home.line}; graded live: level {graded.level}{' (provisional)' if graded.provisional else ''} "
              f"(expects {stated} live)")
    return Outcome(ex.id, f"variant:{path.stem}", ok, detail)


def verify(exercise_ids: list[str] | None = None, seed: int = 0, jobs: int | None = None):
    """Yield one Outcome per rubric, reference, mutant and correct variant, in catalog order.

    All subjects of all chosen exercises share one pool of worker processes (one per core):
    grading is CPU-bound, and a worker that dies is one failed outcome, never a stopped run.
    """
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    subjects = ([(ex.id, None) for ex in chosen] + [(ex.id, m.name) for ex in chosen for m in ex.mutants]
                + [(ex.id, f"variant:{p.stem}") for ex in chosen for p in ex.correct_variants])
    jobs = max(1, min(jobs or os.cpu_count() or 1, len(subjects)))
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state shared with ours
    # Workers ignore Ctrl-C (the terminal sends it to them too): the parent ends them (_end_workers).
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_worker_start) as pool:
        futures = {subject: pool.submit(_judged, *subject, seed) for subject in subjects}
        try:
            with interruption.ended_by_signals():  # SIGTERM too, as a KeyboardInterrupt here
                yield from _in_order(chosen, futures)
        except BaseException:  # Ctrl-C, SIGTERM, or a caller that stopped reading: nothing goes on running
            _end_workers(pool)
            raise


def _worker_start():
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends its workers (_end_workers)
    own_tests.share_stages()  # mutants carry the reference's own tests: one stage per worker, not one per mutant


def _in_order(chosen, futures):
    for ex in chosen:
        yield judge_rubric(ex)
        for name in [None, *(m.name for m in ex.mutants), *(f"variant:{p.stem}" for p in ex.correct_variants)]:
            try:
                yield futures[ex.id, name].result()
            except Exception as exc:  # noqa: BLE001  the worker died: report it, go on
                yield Outcome(ex.id, name or "reference", False, f"grading failed: {type(exc).__name__}: {exc}")


END_SECONDS = 30.0  # how long an ended worker may take to kill its child and remove its scratch
SCRATCH_PREFIX = "kvgrade-verify-"  # then the worker's pid: what an ended worker left, its parent removes


def _end_workers(pool: ProcessPoolExecutor):
    """Cancel every subject not started and end the workers: SIGTERM ends a grading as an interruption
    (its child killed, its scratch removed, then the worker leaves: ``_judged``); SIGKILL after
    ``END_SECONDS``. Without this a stopped verify ran every queued subject to the end."""
    workers = list((pool._processes or {}).values())  # no public handle on them, and shutdown drops this one
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.terminate()
    for process in workers:
        process.join(END_SECONDS)
        if process.is_alive():
            process.kill()
            process.join(END_SECONDS)
        for left in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{process.pid}-*"):
            shutil.rmtree(left, ignore_errors=True)  # the signal came between the worker's own cleanups


def _judged(exercise_id: str, mutant_name: str | None, seed: int) -> Outcome:
    """:func:`judge` in a pool worker, its scratch folders inside one of its own. An interruption (the
    parent's SIGTERM) cleans up on its way here, that folder goes with whatever a thread left in it, and
    the worker leaves rather than take the next subject, as a pool worker otherwise would."""
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-") as scratch:
        os.chmod(scratch, 0o755)  # a "uid" child walks through it to its own scratch
        outer, tempfile.tempdir = tempfile.tempdir, scratch  # every scratch folder of this grading goes with this one
        try:
            return judge(exercise_id, mutant_name, seed)
        except KeyboardInterrupt:
            pass
        finally:
            tempfile.tempdir = outer
    os._exit(1)


@functools.lru_cache(maxsize=4)
def outcomes(seed: int = 0) -> tuple[Outcome, ...]:
    """Every outcome of one verify run over the whole kit, kept for this process: tests
    parametrize over it instead of starting a pool per exercise."""
    return tuple(verify(seed=seed))


def judge(exercise_id: str, mutant_name: str | None, seed: int) -> Outcome:
    """Grade the reference (mutant_name None), one mutant or one correct variant
    ("variant:<stem>") of an exercise, and judge it."""
    ex = catalog.get(exercise_id)
    with tempfile.TemporaryDirectory(prefix="kvgrade-verify-") as tmp:
        if mutant_name is None:
            result = engine.grade(reference_submission(Path(tmp)), [ex.id], seed=seed, blame_reference=False)
            return judge_reference(ex, result.exercise(ex.id))
        if mutant_name.startswith("variant:"):
            path = next(p for p in ex.correct_variants if p.stem == mutant_name.split(":", 1)[1])
            submission = variant_submission(path, ex.id, Path(tmp))
            outcome = judge_variant(ex, path, engine.grade(submission, [ex.id], seed=seed).exercise(ex.id))
            live = module_constant(path, "EXPECTED_LIVE_LEVEL")
            if live is None or not outcome.ok:
                return outcome
            return judge_live_variant(ex, path, live, engine.grade(submission, [ex.id], seed=seed, live=True), outcome)
        mutant = next(m for m in ex.mutants if m.name == mutant_name)
        result = engine.grade(mutant_submission(mutant, Path(tmp)), [ex.id], seed=seed)
        return judge_mutant(ex, mutant, result.exercise(ex.id))
