"""What hidden checks are written with: the ``ex`` fixture's type, failures, and the toolkit.

A hidden check is a function ``check_<id>(ex)`` in ``grader/hidden/<exercise>/checks.py``;
its docstring's first line says what it tries, in words safe to show a candidate. It calls
the candidate through ``ex.candidate`` (a proxy to the child process), compares with its own
oracle (shared attention oracles live in ``grader/hidden/_oracles.py``), and fails with
:func:`fail`, giving what was tried (``case``), for masks and grids a picture, and the kind of
failure (what it costs). The toolkit, so a new exercise's checks are a short list of
``check_*`` functions:

- sizes: :func:`odd_size` (numpy's half-open range, never a power of two), :func:`chunk_sizes`;
- values: :func:`expect_array`, :func:`expect_raises`, :func:`describe`;
- invalid arguments: :func:`expect_rejected` (ValueError, or the exercise's diagnosis is named);
- precision: :func:`close` / :func:`off_by` (section 1's rule, constant :data:`PRECISION`);
- evidence: :func:`measure`, the one place memory and warnings are taken;
- diagnoses: a list of :class:`Variant` per function, :func:`explain` over every failing case
  (:func:`fits` for one case),
  :func:`name_mistakes` to record them and say so in the message;
- pictures: :func:`grid_picture` (``keep_corner`` for decode masks).
"""
from __future__ import annotations

import contextlib
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .catalog import Exercise
from .result import FAILURE_KINDS, Diagnosis, plural  # noqa: F401 (plural: the one way checks count things)
from .sandbox import CandidateCrashed, CandidateRaised, RemoteObject, Sandbox

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
    scalar or a broadcastable shape is a failure, never silently accepted. The right shape in
    another numeric dtype fails as "hygiene"; anything else as "wrong".
    """
    wanted = {"b": "bool", "i": "int", "u": "uint", "f": "float"}
    want = " or ".join(wanted[k] for k in kind) + f" array of shape {tuple(shape)}"
    if not isinstance(value, np.ndarray):
        fail(f"{call} returned {summarize(value)}; expected a numpy {want}", case)
    if value.dtype.kind not in kind or value.shape != tuple(shape):
        # the right shape in another dtype is a dtype slip (hygiene); a wrong shape is a wrong answer
        fail(f"{call} returned {_article(str(value.dtype))} {value.dtype} array of shape {value.shape}; "
             f"expected {_article(want)} {want}", case,
             kind="hygiene" if value.shape == tuple(shape) and value.dtype.kind in "biuf" else "wrong")
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


def expect_rejected(ex: "ExerciseRun", fn, *args, call: str, diagnosis: str,
                    why: str = "invalid arguments must be rejected, not given a silent answer", case=None, **kwargs):
    """Invalid arguments: calling ``fn`` must raise ValueError. When it returns or raises anything
    else, ``diagnosis`` (the exercise's own id, named at the call so the rubric's ids can be
    found in its checks) is named ("<call> did not raise ValueError: <why>") and the hygiene failure
    of :func:`expect_raises` propagates. A crash or a timeout is not this mistake and names nothing;
    checks of the state after a rejected call are separate and name nothing either."""
    try:
        return expect_raises(fn, *args, call=call, case=case, **kwargs)
    except CheckFailure:
        ex.diagnose(diagnosis, f"{call} did not raise ValueError: {why}")
        raise


def _article(word: str) -> str:
    return "an" if word[:1] in "aeio" else "a"


def describe(value) -> str:
    """What a value is, in a few words safe to quote: the one describer every check uses."""
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and value.dtype.kind in "iub" and 0 < value.size <= 12:
            return f"{value.dtype} array {value.tolist()}"
        return f"{_article(str(value.dtype))} {value.dtype} array of shape {value.shape}"
    if isinstance(value, RemoteObject):  # a value that is not data stayed in the child
        return f"an object of type {value.type_name} (not data)"
    if isinstance(value, (bool, int, float, str, type(None), np.generic)):
        return repr(value)[:40]
    if isinstance(value, (list, tuple, dict)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


summarize = describe  # the older name, kept for callers outside the hidden checks


# -- sizes ---------------------------------------------------------------------------------------


def odd_size(rng: np.random.Generator, low: int, high: int) -> int:
    """A size in [low, high) (numpy's half-open range) that is not a power of two, unless the
    range holds none: sizes that do not divide blocks are where tiling and offsets go wrong."""
    for _ in range(64):
        n = int(rng.integers(low, high))
        if n & (n - 1):
            return n
    return int(low)


def chunk_sizes(rng, tokens, low, high, p_one=0.3) -> list[int]:
    """Random chunk sizes summing to ``tokens``: T = 1 with probability ``p_one``, else low..high."""
    sizes, done = [], 0
    while done < tokens:
        T = 1 if rng.random() < p_one else int(rng.integers(low, high + 1))
        sizes.append(min(T, tokens - done))
        done += sizes[-1]
    return sizes


@contextlib.contextmanager
def other_argument_types(rejected: str, case: dict | None = None):
    """Around calls passing numpy integers (or lists where the contract allows them): a clear
    ValueError rejecting them is a hygiene slip, stated as ``rejected``; any other exception
    on these valid inputs propagates and counts as a crash."""
    try:
        yield
    except CandidateRaised as exc:
        if not exc.is_a("ValueError"):
            raise
        fail(f"{rejected} ({exc.message[:120]}); the contract accepts numpy integers wherever an int is "
             "asked for, and lists wherever an index array is", case, kind="hygiene")


def odd_size_closed(rng: np.random.Generator, low: int, high: int) -> int:
    """``odd_size`` over the closed range [low, high], for checks that state their sizes so."""
    return odd_size(rng, low, high + 1)


# -- precision: CONTRACT section 1's one rule ------------------------------------------------------

PRECISION = 64
"""The constant of section 1's rule, the same for every exercise (the README states it): a value
may differ from the exact answer by ``PRECISION * eps(dtype) * max(1, m) * max(1, |want|)``, with
dtype the lowest precision among the float inputs and m the largest magnitude of the scaled
scores or lse values involved. 64 ulps cover a careful float32 sum over thousands of terms; a
float32 accumulation of float64 inputs misses by about 1e9 float64 ulps."""


def input_eps(*inputs) -> float:
    """eps of the lowest float precision among ``inputs`` (arrays or scalars; others ignored)."""
    kinds = [np.asarray(x).dtype for x in inputs if isinstance(x, (np.ndarray, np.floating))]
    floats = [d for d in kinds if d.kind == "f"]
    return max((float(np.finfo(d).eps) for d in floats), default=float(np.finfo(np.float64).eps))


def tolerance(inputs=(), magnitude: float = 1.0, scale: float = 1.0) -> float:
    """Section 1's absolute tolerance for values of size ``scale`` computed from ``inputs``
    whose scores or lse reach ``magnitude``."""
    m = float(magnitude) if np.isfinite(magnitude) else 1.0
    return PRECISION * input_eps(*inputs) * max(1.0, abs(m)) * max(1.0, abs(float(scale)))


def off_by(got, want, inputs=(), magnitude: float = 1.0) -> np.ndarray:
    """Per entry: True where ``got`` misses ``want`` beyond section 1's tolerance. Infinities
    and NaN must match exactly (-inf lse is a value, not a rounding)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    finite = np.isfinite(want)
    scale = float(np.max(np.abs(want[finite]), initial=0.0))
    tol = tolerance(inputs, magnitude, scale)
    with np.errstate(invalid="ignore"):
        near = np.abs(got - want) <= tol
    return ~np.where(finite, near & np.isfinite(got), (got == want) | (np.isnan(got) & np.isnan(want)))


def close(got, want, inputs=(), magnitude: float = 1.0) -> bool:
    """``got`` equals the exact ``want`` within section 1's precision rule (same shape)."""
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and not off_by(got, want, inputs, magnitude).any()


# -- evidence: memory and warnings -----------------------------------------------------------------


def measure(ex: "ExerciseRun", target, name: str, *args, memory: bool = True, **kwargs):
    """(value, peak bytes or None, reported warnings) of ``target.name(*args, **kwargs)``.

    The one place a check takes memory and warnings. Memory is measured by the grader, outside
    the child (``target.measured``: a cgroup's peak, or the child's own high-water mark where no
    cgroup can be had); ``memory=False`` takes the warnings only (``target.with_stats``, one
    round trip fewer). A peak of None means nothing could be measured, never "fine". Warnings
    are what the child reports: they may count against a candidate, never for one. A call that
    runs out of memory is a broken must-not (the allocation was too large), not a crash.
    """
    try:
        if memory:
            value, stats = target.measured(name, *args, **kwargs)
        else:
            value, stats = target.with_stats(name, *args, **kwargs)
    except CandidateRaised as exc:
        if memory and exc.is_a("MemoryError"):
            fail(f"{name} ran out of memory ({exc.message[:80]})", kind="must_not")
        raise
    except CandidateCrashed as exc:
        if not memory:
            raise
        fail(f"{name} killed its process ({str(exc)[:120]}), as when it passes the memory limit",
             kind="must_not")
    return value, stats.peak_bytes if memory else None, list(stats.warnings)


# -- diagnoses -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A known-wrong version of one function: ``build(case)`` gives its output on ``case``
    (None where the mistake does not apply), ``sentence(case)`` names it in that case."""

    id: str
    build: Callable[[Any], Any]
    sentence: Callable[[Any], str]


@dataclass
class Explanation:
    named: list  # [(diagnosis id, sentence)]: mistakes that explain every failing case
    hint: str = ""  # "consistent with ... in this case" when one case fits but not all


def _equal(got, wrong, case) -> bool:
    return np.array_equal(got, wrong)


def fits(variant: Variant, case, got, right: Callable | None = None, same: Callable = _equal) -> bool:
    """Does ``got`` on ``case`` look like ``variant``'s answer (and unlike the right one there)?"""
    wrong = variant.build(case)
    return wrong is not None and same(got, wrong, case) and not (right and same(right(case), wrong, case))


def explain(variants: list, failures: list, right: Callable | None = None,
            same: Callable = _equal) -> Explanation:
    """Which known mistakes explain ``failures``, a list of (case, submitted output)?

    A mistake is named only when it (or it together with one other) matches EVERY failing case,
    so the name cannot change with the seed's choice of cases. Two different mistakes that both
    match everything cannot be told apart: neither is named. A variant equal to ``right(case)``
    matches nothing there. Otherwise one fitting case gives only a hint. ``same(got, wrong, case)``
    compares (exact by default).
    """
    table = [[fits(v, case, got, right, same) for case, got in failures] for v in variants]
    whole = list(dict.fromkeys(v.id for v, row in zip(variants, table) if all(row)))
    if len(whole) == 1:
        v = next(v for v, row in zip(variants, table) if all(row))
        return Explanation([(v.id, v.sentence(failures[0][0]))])
    if len(whole) > 1:
        return Explanation([], "consistent with " + " or ".join(i.replace("_", " ") for i in whole))
    for i, j in ((i, j) for i in range(len(variants)) for j in range(i + 1, len(variants))):
        if variants[i].id != variants[j].id and all(a or b for a, b in zip(table[i], table[j])):
            return Explanation([(v.id, v.sentence(failures[row.index(True)][0]))
                                for v, row in ((variants[i], table[i]), (variants[j], table[j]))])
    for v, row in zip(variants, table):
        if any(row):
            return Explanation([], f"consistent with {v.id.replace('_', ' ')} in this case")
    return Explanation([])


def name_mistakes(ex: "ExerciseRun", explanation: Explanation) -> str:
    """Record the named mistakes on ``ex``; the text to append to a failure message."""
    for diagnosis_id, sentence in explanation.named:
        ex.diagnose(diagnosis_id, sentence)
    parts = [sentence for _, sentence in explanation.named] or ([explanation.hint] if explanation.hint else [])
    return "".join(f"; {p}" for p in parts)


# -- pictures --------------------------------------------------------------------------------------


def grid_picture(expected: np.ndarray, submitted: np.ndarray, title: str, labels=None,
                 keep_corner: bool = False) -> dict:
    """A 2-D picture of expected vs submitted, cropped round the first differing cell.

    ``labels`` maps values to one-character symbols (default: '#' True/1, '.' False/0).
    ``keep_corner``: for decode masks, whose diagonal ends in the bottom-right cell. When the
    corner's crop shows a difference, the picture is that crop, so a T << S mask is drawn where
    it goes wrong, not over its first 48 keys; otherwise it is cropped round the first difference.
    """
    expected, submitted = np.asarray(expected), np.asarray(submitted)
    rows, cols = expected.shape
    differ = expected != submitted if expected.shape == submitted.shape else np.zeros((rows, cols), bool)
    corner = np.s_[max(0, rows - PICTURE_MAX[0]):, max(0, cols - PICTURE_MAX[1]):]
    if keep_corner and differ[corner].any():
        top, left = max(0, rows - PICTURE_MAX[0]), max(0, cols - PICTURE_MAX[1])
    else:
        diff = np.argwhere(differ)
        r0, c0 = (diff[0] if len(diff) else (0, 0))
        top = int(max(0, min(r0 - PICTURE_MAX[0] // 2, rows - PICTURE_MAX[0])))
        left = int(max(0, min(c0 - PICTURE_MAX[1] // 2, cols - PICTURE_MAX[1])))
    crop = np.s_[top:top + PICTURE_MAX[0], left:left + PICTURE_MAX[1]]
    return {
        "kind": "grid",
        "title": title,
        "shape": [rows, cols],
        "origin": [int(top), int(left)],  # the crop's first row and column in the full grid
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
        self.named: list[tuple[str, str, str]] = []  # (check id, diagnosis id, sentence), every one named
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


@dataclass
class Miss:
    """One failing case: its size (to pick the smallest), what to say, and the mistakes that fit it
    as (diagnosis id, sentence) pairs."""
    size: int
    message: str
    case: dict
    kind: str = "wrong"
    found: list = field(default_factory=list)


def settle(ex, misses: list):
    """Fail with the smallest miss (``None`` entries are cases that passed); name a mistake only
    when it explains every miss of the check, else say which one the smallest case fits."""
    misses = [m for m in misses if m is not None]
    if not misses:
        return
    shared = set.intersection(*({i for i, _ in m.found} for m in misses))
    smallest = min(misses, key=lambda m: m.size)
    message = smallest.message
    for diagnosis_id, sentence in smallest.found:
        if diagnosis_id in shared:
            ex.diagnose(diagnosis_id, sentence)
            message += f"; {sentence}"
    if smallest.found and not shared:
        message += f" (consistent with {smallest.found[0][0]} in this case, not in every failing case)"
    fail(message, case=smallest.case, kind=smallest.kind)
