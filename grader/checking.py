"""What hidden checks are written with: the ``ex`` fixture's type, failures, strict expectations.

A hidden check is a function ``check_<id>(ex)`` in ``grader/hidden/<exercise>/checks.py``;
its docstring's first line says what it tries, in words safe to show a candidate. It calls
the candidate through ``ex.candidate`` (a proxy to the child process), compares with its own
oracle, and fails with :func:`fail`, giving what was tried (``case``) and, for masks and
grids, a picture. Known mistakes are named with ``ex.diagnose``.
"""
from __future__ import annotations

import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .catalog import Exercise
from .result import FAILURE_KINDS, Diagnosis
from .sandbox import CandidateRaised, RemoteObject, Sandbox

PICTURE_MAX = (16, 48)  # rows, columns of a drawn grid; larger ones are cropped round the error


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


def expect_array(value, *, call: str, shape: tuple, kind: str, case: dict | None = None) -> np.ndarray:
    """``value`` must be an ndarray of exactly ``shape`` whose dtype kind is one of ``kind``.

    Kinds are numpy's letters: "b" bool, "i" signed int, "u" unsigned, "f" float. A list, a
    scalar or a broadcastable shape is a failure, never silently accepted.
    """
    wanted = {"b": "bool", "i": "int", "u": "uint", "f": "float"}
    want = " or ".join(wanted[k] for k in kind) + f" array of shape {tuple(shape)}"
    if not isinstance(value, np.ndarray):
        fail(f"{call} returned {summarize(value)}; expected a numpy {want}", case)
    if value.dtype.kind not in kind or value.shape != tuple(shape):
        fail(f"{call} returned {_article(str(value.dtype))} {value.dtype} array of shape {value.shape}; "
             f"expected {_article(want)} {want}", case)
    return value


def expect_raises(fn, *args, exception: str = "ValueError", call: str, case=None, **kwargs):
    """Calling ``fn`` in the candidate must raise ``exception`` (or a subclass of it)."""
    try:
        value = fn(*args, **kwargs)
    except CandidateRaised as exc:
        if exc.is_a(exception):
            return exc
        fail(f"{call} raised {exc.type_name} ({exc.message}); expected {exception}", case, kind="hygiene")
    fail(f"{call} returned {summarize(value)}; expected it to raise {exception}", case, kind="hygiene")


def _article(word: str) -> str:
    return "an" if word[:1] in "aeio" else "a"


def summarize(value) -> str:
    if isinstance(value, np.ndarray):
        return f"{_article(str(value.dtype))} {value.dtype} array of shape {value.shape}"
    if isinstance(value, RemoteObject):  # a value that is not data stayed in the child
        return f"an object of type {value.type_name} (not data)"
    if isinstance(value, (bool, int, float, str, type(None), np.generic)):
        return repr(value)[:40]
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def grid_picture(expected: np.ndarray, submitted: np.ndarray, title: str, labels=None) -> dict:
    """A 2-D picture of expected vs submitted, cropped round the first differing cell.

    ``labels`` maps values to one-character symbols (default: '#' True/1, '.' False/0).
    """
    expected, submitted = np.asarray(expected), np.asarray(submitted)
    rows, cols = expected.shape
    diff = np.argwhere(expected != submitted) if expected.shape == submitted.shape else np.empty((0, 2))
    r0, c0 = (diff[0] if len(diff) else (0, 0))
    top = int(max(0, min(r0 - PICTURE_MAX[0] // 2, rows - PICTURE_MAX[0])))
    left = int(max(0, min(c0 - PICTURE_MAX[1] // 2, cols - PICTURE_MAX[1])))
    crop = np.s_[top:top + PICTURE_MAX[0], left:left + PICTURE_MAX[1]]
    return {
        "kind": "grid",
        "title": title,
        "shape": [rows, cols],
        "origin": [top, left],  # the crop's first row and column in the full grid
        "expected": expected[crop].astype(int).tolist(),
        "submitted": submitted[crop].astype(int).tolist(),
        "labels": labels or {"1": "#", "0": "."},
    }


class ExerciseRun:
    """The ``ex`` fixture: one exercise of one submission, being checked."""

    def __init__(self, exercise: Exercise, seed: int, sandbox: Sandbox | None, module_path: Path | None):
        self.exercise, self.seed, self.sandbox = exercise, seed, sandbox
        self.module_path = module_path
        self.diagnoses: dict[str, Diagnosis] = {}
        self.check_id = ""
        self.rng = np.random.default_rng(seed)
        # {variant: own_tests.OwnTestsRun}: the candidate's own tests run against the reference
        # and each declared known-wrong version; filled by the engine as grading begins
        self.own_tests: Mapping = {}

    @property
    def candidate(self):
        """The candidate's module: ``ex.candidate.fn(args)`` runs ``fn`` in the child."""
        return self.sandbox.module

    def helper(self, name: str):
        """A kit helper module (e.g. ``gpt2``) in the candidate's process, to build objects there."""
        return self.sandbox.helper(name)

    def begin_check(self, check_id: str):
        """Called before each check: a generator of its own, so results do not depend on order."""
        self.check_id = check_id
        self.rng = np.random.default_rng([self.seed, zlib.crc32(check_id.encode())])

    def diagnose(self, diagnosis_id: str, message: str):
        """Name a classic mistake the submission shows; the first concrete sentence is kept."""
        self.diagnoses.setdefault(diagnosis_id, Diagnosis(diagnosis_id, message))

    @property
    def own_tests_path(self) -> Path | None:
        if self.module_path is None:
            return None
        path = self.module_path.parent / f"test_{self.exercise.id}.py"
        return path if path.is_file() and not path.is_symlink() else None
