"""A check's run: the ``ex`` fixture (:class:`ExerciseRun`), failures (:func:`fail`) and the running
check's hygiene slips (:func:`note_slip`)."""
from __future__ import annotations

import contextlib
import gc
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..catalog import Exercise
from ..result import FAILURE_KINDS, Diagnosis
from ..sandbox import Sandbox
from . import binding

BINDING_STREAM = 0xB1D  # the third word of the bindings' seed
_running = None  # the ExerciseRun whose check is running, where note_slip records (one check at a time)


class CheckFailure(AssertionError):
    """A check failed for a reason it can state. ``case`` says how to reproduce it; ``kind``
    (one of ``result.FAILURE_KINDS``) says what the failure is, and so what it costs."""

    def __init__(self, message: str, case: dict | None = None, picture: dict | None = None,
                 kind: str = "wrong"):
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {kind!r}")
        super().__init__(message)
        self.message, self.case, self.picture, self.kind = message, case, picture, kind


def fail(message: str, case: dict | None = None, picture: dict | None = None, kind: str = "wrong"):
    raise CheckFailure(message, case, picture, kind)


def note_slip(message: str, slips: list | None = None):
    """Record a hygiene slip in ``slips``, by default the running check's: the check fails as
    "hygiene" (cap hire) if nothing worse does."""
    if slips is None and _running is not None:
        slips = _running.slips
    if slips is not None:
        slips.append(message)


class ExerciseRun:
    """The ``ex`` fixture: one exercise of one submission, being checked."""

    def __init__(self, exercise: Exercise, seed: int, sandbox: Sandbox | None, module_path: Path | None):
        self.exercise, self.seed, self.sandbox = exercise, seed, sandbox
        self.module_path = module_path
        self.diagnoses: dict[str, Diagnosis] = {}
        self.named: list[tuple[str, str, str]] = []  # (check id, diagnosis id, sentence), every one named
        self.check_id = ""
        self.slips: list[str] = []  # hygiene slips of the running check (see note_slip)
        self.rng = np.random.default_rng(seed)
        self.failed_before = False  # a check failed since the last tidy: its traceback may hold proxies
        self.measures_memory = True  # the checks module measures memory (the plugin says, per check)
        # {variant: own_tests.OwnTestsRun}: the candidate's own tests run against the reference
        # and each declared known-wrong version; filled by the engine as grading begins
        self.own_tests: Mapping = {}
        # what a checks module keeps across its checks, by its own key: the (case, answer) pairs judged so far,
        # which a mistake of the whole computation must fit, wherever they were judged
        self.evidence: dict[Any, list] = {}
        self.bindings_drawn = True  # every candidate call goes out in a drawn binding (calls_as_written)
        self.binding_rng = np.random.default_rng(seed)
        self.bindings: list[str] = []

    @property
    def candidate(self):
        """The candidate's module: ``ex.candidate.fn(args)`` runs ``fn`` in the child."""
        return self.sandbox.module

    def helper(self, name: str):
        """A kit helper module (e.g. ``gpt2``) in the candidate's process, to build objects there."""
        return self.sandbox.helper(name)

    def begin_check(self, check_id: str):
        """Called before each check: a generator of its own, so results do not depend on order."""
        global _running
        self.check_id, self.slips, _running = check_id, [], self
        self.rng = np.random.default_rng([self.seed, zlib.crc32(check_id.encode())])
        # the bindings calls go out in: a stream of their own, so the check's own draws stay as they were
        self.binding_rng = np.random.default_rng([self.seed, zlib.crc32(check_id.encode()), BINDING_STREAM])
        self.bindings: list[str] = []  # how this check's calls went out, where not as written
        if self.sandbox is not None:
            self.sandbox.binder = self._drawn_binding

    def _drawn_binding(self, where: str, name: str, args: list, kwargs: dict):
        """The binding a candidate call goes out in (``checking.binding``), or None: as written."""
        if not self.bindings_drawn:
            return None
        params = binding.call_signature(self.exercise.stub_path, name, where == "method")
        bound = None if params is None else binding.drawn(params, args, kwargs, self.binding_rng)
        if bound is not None:
            self.bindings.append(f"{name} {bound[2]}")
        return bound

    @contextlib.contextmanager
    def calls_as_written(self):
        """Calls go out exactly as the check writes them (a check that judges the bindings themselves)."""
        before, self.bindings_drawn = self.bindings_drawn, False
        try:
            yield
        finally:
            self.bindings_drawn = before

    def tidy(self):
        """Before every check of an exercise that measures memory: after a failure, the proxies its
        traceback holds in reference cycles die; then the child drops what the grader released and
        frees what nothing holds (``Sandbox.collect``), so a measured call begins without an earlier
        check's garbage. Done at check boundaries, measured or not, never beside a measured call:
        red team 5 read a collection made just before each measured call as the sign to take its
        lean path."""
        if self.failed_before:
            gc.collect()
            self.failed_before = False
        self.sandbox.collect()

    def slip_failure(self) -> CheckFailure | None:
        """The running check's hygiene slips as one failure, or None: used when nothing worse failed."""
        if not self.slips:
            return None
        others = len(self.slips) - 1
        more = f" (and {others} more slip{'s' if others > 1 else ''})" if others else ""
        return CheckFailure(self.slips[0] + more, kind="hygiene")

    def diagnose(self, diagnosis_id: str, message: str):
        """Name a classic mistake the submission shows; the first concrete sentence is kept as the
        diagnosis, and every one is logged with its check, so a report can say it once."""
        self.diagnoses.setdefault(diagnosis_id, Diagnosis(diagnosis_id, message))
        self.named.append((self.check_id, diagnosis_id, message))

    @property
    def own_tests_path(self) -> Path | None:
        if self.module_path is None:
            return None
        path = self.module_path.parent / f"test_{self.exercise.id}.py"
        return path if path.is_file() and not path.is_symlink() else None


def slips_of(ex: ExerciseRun) -> list:
    """The container slips met so far by the check in progress."""
    return ex.slips


def settle_slips(slips: list, case: dict | None = None):
    """Fail as hygiene now when the values were right but came in another container or dtype
    (the plugin does the same at the end of any check that met slips and nothing worse)."""
    if slips:
        more = f" (and {len(slips) - 1} more such replies)" if len(slips) > 1 else ""
        fail(f"{slips[0]}{more}: the right values in another container or dtype than asked", case,
             kind="hygiene")
