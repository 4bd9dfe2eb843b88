"""The pytest plugin through which the grader runs hidden checks and collects their results.

Registered for one ``pytest.main`` run: it provides the ``ex`` fixture, restricts the run to
chosen checks, and records one ``CheckResult`` per check from the report of each phase (a
failure while setting up counts like a failure of the check). Collection errors are kit
bugs and are kept apart.
"""
from __future__ import annotations

import time

import pytest

from .checking import CheckFailure, ExerciseRun
from .result import CheckResult
from .sandbox import CandidateFault


def check_id(item) -> str:
    return item.name.removeprefix("check_")


class CollectChecks:
    def __init__(self, runs: dict[str, ExerciseRun], only: set[str] | None = None, progress=None):
        self.runs, self.only, self.progress = runs, only, progress
        self.results: dict[str, list[CheckResult]] = {eid: [] for eid in runs}
        self.kit_errors: dict[str, list[str]] = {eid: [] for eid in runs}
        self._started: dict[str, float] = {}

    def _exercise_of(self, module_name: str) -> str:
        # grader.hidden.<id>.checks
        return module_name.split(".")[-2]

    @pytest.fixture
    def ex(self, request) -> ExerciseRun:
        run = self.runs[self._exercise_of(request.module.__name__)]
        run.begin_check(check_id(request.node))
        return run

    def pytest_collection_modifyitems(self, items, config):
        if self.only:
            keep = [i for i in items if check_id(i) in self.only]
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
        if any(r.id == check_id(item) for r in self.results[eid]):
            return  # a teardown failure after a recorded result changes nothing
        doc = (item.function.__doc__ or "").strip().splitlines()
        result = CheckResult(check_id(item), report.passed, description=doc[0] if doc else "",
                             seconds=round(time.perf_counter() - self._started.get(item.nodeid, 0), 3))
        if not report.passed:
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
