"""The candidate's own tests (``test_<id>.py``) as a stage of grading, judged by mutation score.

Which implementations the tests run against is data: the rubric's ``[own_tests]`` section
names the classic mistake (``classic``) and the behaviour-visible ones (``scored``): known-wrong
versions, each one file ``solutions/mutants/<id>/<name>.py`` that passes the kit's public tests
(so a copy of the public tests catches none of them: credit is for what a candidate adds). The engine
runs them (one per variant, plus the correct answers: the reference as it is, and the reference
handing out every array as a read-only view) once every candidate child of the submission
has ended, one at a time, and hands the checks a mapping ``{variant: OwnTestsRun}``.

Each run is two processes: the candidate's tests under pytest, importing a generated
``<id>.py`` that forwards every call (``sandbox/blackbox.py``), and the implementation under
test in a worker of its own, its files out of the tests' reach. The grader relays between
them (``sandbox/relay.py``). Outcomes come test by test from pytest's JUnit XML.

Judging: a test that fails on a correct answer (either reference run: section 1 says a read-only
result is fine, so a test that writes into a result, or asks that it be read-only, fails on one
of them) disagrees with the contract and is set aside.
A variant is caught when some remaining test fails on it; the score is the share of
``scored`` variants caught. A strong suite may disagree with the contract once or twice; more
than ``MAX_SET_ASIDE`` tests (pytest node ids) set aside caps the suite at hire, whatever its
score: else one test per possible answer would let the reference pick the right ones.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from .catalog import CatalogError, Exercise
from .checking import fail, plural
from .rubric import OwnTests, Rubric, record
from .sandbox import CandidateFault, Limits, relay
from .sandbox.launch import RUNTIME_DIR, Scratch, kill, spawn

TIMEOUT_SECONDS = 60.0
REFERENCE = "reference"
READ_ONLY = "reference_read_only"  # the reference, every array it hands the tests a read-only view
CORRECT = (REFERENCE, READ_ONLY)  # answers the contract allows: a test failing on either is set aside
JUNIT = "junit.xml"  # one of the sandbox's REPORT_FILES
JUNIT_MAX_BYTES = 4 << 20  # the JUnit file is written by the candidate's process: read at most this
SHOWN = 8  # test names listed in a message
MAX_SET_ASIDE = 2  # tests failing on the reference that a suite at strong_hire may hold
CHECK_PREFIX = "own_tests_"  # every own-tests check id starts so (the engine skips the runs otherwise)


def declaration(exercise: Exercise) -> OwnTests | None:
    """The rubric's ``[own_tests]`` (classic, scored, strong_hire_score), or None where the
    exercise asks for no tests. The one place that reads it."""
    return exercise.rubric.own_tests


def judgeable(exercise: Exercise) -> bool:
    """Whether the exercise asks for own tests and this build holds what they run against (a
    grader-only build has no reference solutions or known-wrong versions)."""
    try:
        return declaration(exercise) is not None and all(p.is_file() for p in variants(exercise).values())
    except CatalogError:
        return False


NOT_JUDGED = ("not judged by this grader-only build, which holds no reference or known-wrong versions to run "
              "the tests against; the full kit (Gradescope, kvgrade batch) judges them")


def rubric_for(exercise: Exercise) -> Rubric:
    """The rubric to judge with. Where this build cannot run the own tests, their checks leave
    each criterion, and one left without checks is to be observed: it neither raises nor lowers
    the level, which is provisional; its text says why. No guess either way."""
    rubric = exercise.rubric
    if declaration(exercise) is None or judgeable(exercise):
        return rubric
    criteria = tuple(
        replace(c, checks=tuple(k for k in c.checks if not k.startswith(CHECK_PREFIX)), text=f"{c.text} ({NOT_JUDGED})")
        if any(k.startswith(CHECK_PREFIX) for k in c.checks) else c for c in rubric.criteria)
    return replace(rubric, criteria=criteria)


def judged_record(exercise: Exercise) -> dict:
    """The rubric record a result stores (``rubric.record``): of :func:`rubric_for`, the rubric this build
    judges with. ``report`` compares a saved result's record with this one, so a grader-only build's own
    results never read as edited."""
    return record(rubric_for(exercise), exercise.id, exercise.rubric_path.read_bytes())


def variants(exercise: Exercise) -> dict[str, Path]:
    """What the tests run against: the reference (twice: as it is and read-only, see CORRECT), then each
    declared known-wrong version."""
    section = declaration(exercise)
    wanted = dict.fromkeys([section.classic, *section.scored]) if section else {}
    return {REFERENCE: exercise.reference_path, READ_ONLY: exercise.reference_path,
            **{d: exercise.mutant(d).module_path for d in wanted}}


# -- one run --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OwnTestsRun:
    outcome: str  # "ran" | "no_tests" | "error"
    tests: dict = field(default_factory=dict)  # test id -> "passed" | "failed" | "skipped"
    detail: str = ""  # why it could not run; never the process's output
    by_kit: bool = False  # it could not run for the kit's own reason (the implementation under test)
    exit: int | None = None  # pytest's status, when it ended
    output: str = ""  # the tail of the tests' process's output, when asked for (``output_chars``)

    @property
    def failed(self) -> set[str]:
        return {t for t, o in self.tests.items() if o == "failed"}

    def agreeing(self, again: OwnTestsRun) -> OwnTestsRun:
        """This run as two runs against the same known-wrong version agree: a test failed only where it failed
        in both. A test that fails at random (one of 200, picked by os.urandom: red team 24) catches nothing,
        and a run that could not run again is that run."""
        if again.outcome != "ran":
            return again
        return replace(self, tests={t: "failed" if o == "failed" and again.tests.get(t) == "failed" else
                                    ("passed" if o == "failed" else o) for t, o in self.tests.items()})

    @property
    def line(self) -> str:
        if self.outcome == "ran":
            return f"{plural(len(self.tests), 'test')}, {len(self.failed)} failing"
        return "no tests were collected" if self.outcome == "no_tests" else f"could not run: {self.detail}"


def run(test_file: Path, implementation: Path, exercise: Exercise, limits: Limits,
        timeout: float = TIMEOUT_SECONDS, seed: int = 0, read_only: bool = False,
        output_chars: int = 0) -> OwnTestsRun:
    """Run the tests in ``test_file`` (and its sibling .py files) against ``implementation``, seen through the
    black box (``read_only``: every array it returns reaches the tests as a read-only view): the candidate's
    own tests, or the kit's public tests for the room (``output_chars`` of pytest's output kept), whose
    report and output then come from a process no candidate code runs in.

    Both processes start their global generators from the one fixed child seed (``policy.CHILD_SEED``).
    """
    deadline = time.monotonic() + timeout
    sources = {exercise.id: exercise.stub_path, **{helper.stem: helper for helper in exercise.helper_files}}
    api = {module: relay.public_names(path) for module, path in sources.items()}
    served = scratch = proc = None
    fds: list = []
    try:  # made inside: an interruption (Ctrl-C, SIGTERM) between making them and the try left both behind
        served = relay.Implementation(exercise.id, implementation, exercise.helper_files, api, limits, seed,
                                      read_only=read_only)
        scratch = Scratch(prefix="kvgrade-tests-")
        served.launch()  # it imports while the tests' process starts
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        fds = [requests_r, requests_w, replies_r, replies_w]
        _fill(scratch, test_file, exercise, {
            module: relay.proxy_source(module, scratch.root / RUNTIME_DIR, requests_w, replies_r, names,
                                       relay.public_constants(sources[module]))
            for module, names in api.items()})
        junit = scratch.root / JUNIT  # pre-created by Scratch; read back with read_private
        proc = spawn(["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                      test_file.name], scratch, limits, pass_fds=(requests_w, replies_r))
        _close(fds, requests_w, replies_r)  # the tests' ends
        os.set_blocking(replies_w, False)
        try:
            served.finish_load()
        except CandidateFault as exc:  # the implementation under test is the kit's own code
            return OwnTestsRun("error", detail=f"the implementation under test did not start ({exc})",
                               by_kit=True)
        relay.serve(served, requests_r, replies_w, proc, deadline)
        _close(fds, requests_r, replies_w)  # EOF for tests still waiting on a refused frame
        code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        kill(proc)  # ends whatever it left running, and drains its output to the end
        return replace(_outcome(code, read_junit(scratch)), exit=code,
                       output=scratch.output_tail(output_chars) if output_chars else "")
    except (relay.RelayTimeout, subprocess.TimeoutExpired):
        return OwnTestsRun("error", detail=f"the tests did not finish within {timeout:g} s")
    finally:
        try:
            kill(proc)
            if served is not None:
                served.stop()
        finally:  # whatever ending the processes raised, nothing is left open or on disk
            _close(fds, *fds)
            if scratch is not None:
                scratch.remove()


def _close(open_fds: list, *fds):
    for fd in fds:
        os.close(fd)
        open_fds.remove(fd)


def _fill(scratch: Scratch, test_file: Path, exercise: Exercise, proxies: dict[str, str]):
    """The tests' folder: the candidate's .py files, and a proxy for the exercise's module and
    each kit helper (the kit's real files stay with the implementation)."""
    runtime = scratch.add_runtime().parent
    shutil.copyfile(Path(relay.__file__).with_name("blackbox.py"), runtime / "blackbox.py")
    siblings = [(p.name, p) for p in sorted(test_file.parent.glob("*.py"))
                if not p.is_symlink() and p.is_file() and p.stat().st_size <= 1 << 20]
    scratch.add_files("work", siblings)
    for module, source in proxies.items():
        (scratch.work / f"{module}.py").write_text(source)
    (scratch.work / "pytest.ini").write_text("[pytest]\n")


def _outcome(code: int, tests: dict) -> OwnTestsRun:
    if tests:
        return OwnTestsRun("ran", tests)
    if code == 5:
        return OwnTestsRun("no_tests")
    return OwnTestsRun("error", detail=f"pytest exited with status {code} and reported no test")


def read_junit(scratch: Scratch) -> dict[str, str]:
    """Outcome per test from the JUnit file the candidate's process wrote, read through
    ``Scratch.read_private`` (the very file the grader created, never a link or a FIFO put in
    its place), and nothing from one over the cap."""
    data = scratch.read_private(JUNIT, cap=JUNIT_MAX_BYTES + 1)
    if not data or len(data) > JUNIT_MAX_BYTES:
        return {}
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return {}
    return {_test_id(case): _case_outcome(case) for case in root.iter("testcase")}


def _test_id(case) -> str:
    where, name = str(case.get("classname", "")), str(case.get("name", ""))
    inner = where.split(".", 1)[1] if "." in where else ""  # a class inside the test module
    return (f"{inner}::{name}" if inner else name)[:200]


def _case_outcome(case) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


# -- scheduling -----------------------------------------------------------------------------


def run_all(exercise: Exercise, test_file: Path, sandbox, limits: Limits, seed: int = 0,
            before_each=lambda: None) -> dict[str, OwnTestsRun]:
    """``{variant: OwnTestsRun}`` for every declared variant, on the exercise's time budget,
    seeded from the grading ``seed``.

    One run at a time, the reference's last (both of them): no two candidate processes ever overlap (a run
    against a mutant cannot ask a run against the reference for its answers), and no candidate
    code starts after the reference's proxy existed. The engine calls this only once every
    candidate child of the submission has ended. ``before_each()`` may raise to stop.
    """
    key = _shared_key(exercise, test_file, limits, seed) if _SHARED is not None else None
    if key in (_SHARED or {}):
        return _SHARED[key]
    declared = variants(exercise)
    done = {}

    def once(variant):
        before_each()
        with sandbox.budgeted(TIMEOUT_SECONDS) as timeout:  # the tests are candidate code too
            return (OwnTestsRun("error", detail=sandbox.over_budget()) if timeout is None
                    else run(test_file, declared[variant], exercise, limits, timeout, seed,
                             read_only=variant == READ_ONLY))

    for variant in sorted(declared, key=lambda v: v in CORRECT):  # stable: mutants in order, then the reference
        done[variant] = once(variant)
        if variant not in CORRECT and done[variant].failed:  # a catch counts once it fails the same way again
            done[variant] = done[variant].agreeing(once(variant))
    runs = {variant: done[variant] for variant in declared}
    if key is not None:
        _SHARED[key] = runs
    return runs


_SHARED: dict | None = None  # {inputs of a stage: its runs} once :func:`share_stages` is called; None: never shared


def share_stages() -> None:
    """From now on, gradings in this process whose own tests are the same files share one own-tests stage.
    For ``verify``'s workers only: they grade dozens of known-wrong versions that all carry the reference's
    tests, and the stage runs those tests against the kit's own variants, never against the module being
    graded (which the tests' folder holds only as a proxy), so its outcome is the same for all of them.
    A process grading candidates never calls this."""
    global _SHARED
    if _SHARED is None:
        _SHARED = {}


def _shared_key(exercise: Exercise, test_file: Path, limits: Limits, seed: int) -> tuple:
    """What a stage's outcome depends on: the exercise, the seed, the limits, and the bytes of the files the
    tests' folder receives (``_fill``), less the modules replaced by proxies."""
    proxied = {f"{exercise.id}.py", *(f"{helper.stem}.py" for helper in exercise.helper_files)}
    digest = hashlib.sha256()
    for path in sorted(test_file.parent.glob("*.py")):
        if path.name not in proxied and not path.is_symlink() and path.is_file():
            digest.update(b"%s\0%d\0" % (path.name.encode(), path.stat().st_size) + path.read_bytes())
    return exercise.id, test_file.name, seed, limits, digest.hexdigest()


# -- judging --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    kept: list  # tests that pass on the reference and fail on no correct answer
    set_aside: list  # tests that fail on a correct answer (CORRECT): they disagree with the contract
    caught: list  # variants (diagnosis ids) some kept test fails on
    missed: list  # scored variants no kept test fails on
    scored: list

    @property
    def score(self) -> float:
        return sum(d in self.caught for d in self.scored) / len(self.scored) if self.scored else 1.0

    def as_dict(self) -> dict:
        return {"score": round(self.score, 3), "caught": [d for d in self.caught if d in self.scored],
                "missed": self.missed, "set_aside": self.set_aside}


def judge(runs: Mapping, scored: list) -> Judgement:
    set_aside = set().union(*(runs[c].failed for c in CORRECT if c in runs))
    kept = sorted(t for t, o in runs[REFERENCE].tests.items() if o == "passed" and t not in set_aside)
    caught = [v for v in runs if v not in CORRECT and runs[v].failed & set(kept)]
    return Judgement(kept, sorted(set_aside), caught, [d for d in scored if d not in caught], list(scored))


def summary(exercise: Exercise, runs: Mapping) -> dict | None:
    """The result's ``own_tests`` field: score, caught, missed, set_aside (None when not run)."""
    section = declaration(exercise)
    if not runs or section is None:
        return None
    return judge(runs, list(section.scored)).as_dict()


# -- checks, shared by every exercise with [own_tests] (import them into its checks.py) -----


_AS = {REFERENCE: "", READ_ONLY: " that returns read-only arrays"}


def _listed(names) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _judged(ex) -> Judgement:
    """The judgement, or a failure when nothing is left to judge with."""
    if ex.own_tests_path is None:
        fail(f"no test_{ex.exercise.id}.py beside your module: write tests of your own (see the prompt)",
             kind="tests")
    broken = [variant for variant, run in ex.own_tests.items() if run.by_kit]
    if broken:  # not the candidate's fault: the exercise gets no verdict, never a lower one
        raise RuntimeError(f"own tests could not run against {', '.join(broken)}: "
                           f"{ex.own_tests[broken[0]].detail}")
    for correct in (c for c in CORRECT if c in ex.own_tests):  # a run that could not run judges nothing
        if ex.own_tests[correct].outcome != "ran":
            fail(f"your tests, run against a correct implementation{_AS[correct]}: {ex.own_tests[correct].line}",
                 kind="tests")
    judgement = judge(ex.own_tests, list(declaration(ex.exercise).scored))
    if not judgement.kept:
        fail(f"none of your tests passes on a correct implementation; all disagree with the contract: "
             f"{_listed(judgement.set_aside)}", kind="tests")
    return judgement


def check_own_tests_pass_on_reference(ex):
    """Your own test file is there, and its tests pass on a correct implementation (one that fails there is set
    aside)."""
    _judged(ex)


def expect_classic_caught(ex, diagnosis: tuple[str, str] | None = None):
    """Fail unless a kept test fails on the rubric's classic mistake; ``diagnosis``
    (id, sentence) names what missing it shows."""
    judgement = _judged(ex)
    classic = declaration(ex.exercise).classic
    if classic not in judgement.caught:
        if diagnosis:
            ex.diagnose(*diagnosis)
        fail(f"no test of yours that passes on a correct implementation fails on the classic mistake "
             f"{classic} (run against it: {ex.own_tests[classic].line})", kind="tests")


def check_own_tests_mutation_score(ex):
    """Your own tests catch most known mistakes (their mutation score), and agree with the contract."""
    judgement = _judged(ex)
    bar = declaration(ex.exercise).strong_hire_score
    problems = []
    if judgement.score < bar:
        problems.append(f"caught {len(judgement.scored) - len(judgement.missed)} of {len(judgement.scored)} "
                        f"known mistakes; missed: {_listed(judgement.missed)}")
    if len(judgement.set_aside) > MAX_SET_ASIDE:
        problems.append(f"{len(judgement.set_aside)} of your tests fail on a correct implementation (at most "
                        f"{MAX_SET_ASIDE} may): {_listed(judgement.set_aside)}")
    elif problems and judgement.set_aside:
        problems[0] += f"; set aside as disagreeing with the contract: {_listed(judgement.set_aside)}"
    if problems:
        fail("; ".join(problems), kind="tests")
