"""The pytest plugin through which the grader runs hidden checks and collects their results.

Registered for one ``pytest.main`` run: it provides the ``ex`` fixture, adds the general
rules' checks (``grader/hidden/_general.py``) after each exercise's own, restricts the run to
chosen checks, and records one ``CheckResult`` per check from the report of each phase (a
failure while setting up counts like a failure of the check). Collection errors are kit
bugs and are kept apart. A general check chosen alone still needs the calls the exercise's own
checks make: they run too, unreported.
"""
from __future__ import annotations

import time

import pytest

from .checking import CheckFailure, ExerciseRun
from .checklist import general_checks, summary
from .hidden._general import GENERAL_CHECKS
from .result import CheckResult
from .sandbox import CandidateFault

GENERAL_IDS = {fn.__name__.removeprefix("check_") for fn in GENERAL_CHECKS}


def check_id(item) -> str:
    return item.name.removeprefix("check_")


def measures_memory(module) -> bool:
    """Whether a checks module measures memory: it uses ``measure`` and does not say
    ``MEASURES_MEMORY = False`` (one that takes warnings only). Only then do its checks need the
    kit-only floor child and a collection in the candidate's child before each check."""
    measures = hasattr(module, "measure")
    return bool(getattr(module, "MEASURES_MEMORY", measures))


class CollectChecks:
    def __init__(self, runs: dict[str, ExerciseRun], only: set[str] | None = None, progress=None):
        self.runs, self.only, self.progress = runs, only, progress
        self.results: dict[str, list[CheckResult]] = {eid: [] for eid in runs}
        self.kit_errors: dict[str, list[str]] = {eid: [] for eid in runs}
        self._started: dict[str, float] = {}
        self._unreported: set[str] = set()  # node ids run only to feed a chosen general check

    def _exercise_of(self, module_name: str) -> str:
        # grader.hidden.<id>.checks
        return module_name.split(".")[-2]

    @pytest.fixture
    def ex(self, request) -> ExerciseRun:
        run = self.runs[self._exercise_of(request.module.__name__)]
        run.begin_check(check_id(request.node))
        if self.only is None or self.only & GENERAL_IDS:
            run.sandbox.launch_twin()  # its import overlaps the exercise's own checks
        run.measures_memory = measures_memory(request.module)
        if run.measures_memory:  # checks that measure memory need the kit-only floor
            run.sandbox.launch_floor()
            run.tidy()
        return run

    def pytest_configure(self, config):
        # A report's traceback is never read (messages come from the exceptions themselves), and
        # pytest's long style reads source files for every failing check: the native one is cheap.
        config.option.tbstyle = "native"

    def pytest_collection_modifyitems(self, items, config):
        items[:] = _with_general_checks(items, lambda module: self.runs[module.path.parent.name].exercise)
        if self.only:
            feeding = bool(self.only & GENERAL_IDS)
            keep = [i for i in items if check_id(i) in self.only or (feeding and check_id(i) not in GENERAL_IDS)]
            self._unreported = {i.nodeid for i in keep if check_id(i) not in self.only}
            config.hook.pytest_deselected(items=[i for i in items if i not in keep])
            items[:] = keep

    def pytest_runtest_setup(self, item):
        self._started[item.nodeid] = time.perf_counter()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.when == "teardown" and not report.failed:
            return
        if report.when == "setup" and report.passed:
            return
        eid = self._exercise_of(item.module.__name__)
        if item.nodeid in self._unreported or any(r.id == check_id(item) for r in self.results[eid]):
            return  # a teardown failure after a recorded result changes nothing
        result = CheckResult(check_id(item), report.passed, description=summary(item.function.__doc__),
                             seconds=round(time.perf_counter() - self._started.get(item.nodeid, 0), 3))
        slip = self.runs[eid].slip_failure() if report.passed and report.when == "call" else None
        if slip is not None:  # right values in the wrong container: the check fails as hygiene (cap hire)
            result.passed, result.message, result.kind = False, slip.message, slip.kind
        elif not report.passed:
            self.runs[eid].failed_before = True
            self._explain(result, call.excinfo, eid)
            result.named = [[d, s] for c, d, s in self.runs[eid].named if c == result.id]
        self.results[eid].append(result)
        if self.progress:
            self.progress(eid, result)

    def _explain(self, result: CheckResult, excinfo, eid: str):
        exc = excinfo.value if excinfo else None
        if isinstance(exc, CheckFailure):
            result.message, result.case, result.picture = exc.message, exc.case, exc.picture
            result.kind = exc.kind
            if self.runs[eid].bindings:  # the message writes calls as the check does; the case says how they went
                result.case = dict(result.case or {}, calls_bound=list(dict.fromkeys(self.runs[eid].bindings))[:4])
        elif isinstance(exc, CandidateFault):
            result.message, result.kind = str(exc), "crash"
        elif isinstance(exc, AssertionError):
            result.message = (str(exc).splitlines() or ["assertion failed"])[0]
            result.kind = "wrong"
        else:
            result.message = f"unexpected error while checking: {type(exc).__name__}: {exc}"
            self.kit_errors[eid].append(f"{result.id}: {result.message}")

    def pytest_collectreport(self, report):
        if report.failed:
            for eid in self.runs:
                if f"/{eid}/" in f"/{report.nodeid}":
                    self.kit_errors[eid].append(f"hidden checks failed to load: {report.longreprtext[-500:]}")


def _with_general_checks(items, exercise_of) -> list:
    """``items`` with the general checks that have something to try in each exercise (``general_checks``)
    appended to its own, on the same module."""
    out, last = [], None
    for item in [*items, None]:
        module = item.getparent(pytest.Module) if item is not None else None
        if last is not None and module is not last:
            rules = general_checks(exercise_of(last).stub_path)
            out += [pytest.Function.from_parent(last, name=fn.__name__, callobj=fn) for fn in GENERAL_CHECKS
                    if fn.__name__.removeprefix("check_") in rules]
        if item is not None:
            out.append(item)
        last = module
    return out
