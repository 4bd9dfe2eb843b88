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
- sizes past int64: :func:`past_int64` (asked, and a failure there is hygiene);
- invalid arguments: :func:`expect_rejected` (ValueError, or the exercise's diagnosis is named),
  :func:`misfit_calls` (shapes numpy would broadcast, one argument at a time);
- precision: :func:`close` / :func:`off_by` (section 1's rule, constant :data:`PRECISION`);
- section 1's values and containers: :func:`garbage`, :func:`offset_scores`; :func:`expect_array`
  and :func:`received` take the right values in a list or another dtype as a slip of the running
  check (:func:`note_slip`: hygiene, and the values are still judged);
- evidence: :func:`measure`, the one place memory and warnings are taken (:func:`middle_reading` for a
  must-not: most of three readings on fresh shapes decide); :func:`cpu_of`,
  :class:`ChildCpu` and :func:`child_cpu_seconds`, the child's CPU time as the kernel counts it;
- diagnoses: a list of :class:`Variant` per function, :func:`explain` over every failing case
  (:func:`fits` for one case),
  :func:`name_mistakes` to record them and say so in the message;
- pictures: :func:`grid_picture` (``keep_corner`` for decode masks).
"""
from __future__ import annotations

import contextlib
import gc
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .catalog import Exercise
from .result import FAILURE_KINDS, Diagnosis, plural  # noqa: F401 (plural: the one way checks count things)
from .sandbox import CandidateCrashed, CandidateRaised, RemoteObject, Sandbox
from .sandbox.wire import HELD_BYTES

PICTURE_MAX = (16, 48)  # rows, columns of a drawn grid; larger ones are cropped round the error
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


def expect_array(value, *, call: str, shape: tuple, kind: str, case: dict | None = None,
                 slips: list | None = None) -> np.ndarray:
    """``value`` as an ndarray of exactly ``shape`` whose dtype kind is one of ``kind``.

    Kinds are numpy's letters: "b" bool, "i" signed int, "u" unsigned, "f" float. CONTRACT
    section 1: the right values in the wrong container (a list, a tuple, a 0/1 int mask for a
    bool one, integral floats for ints) are a hygiene slip that caps at hire, and the checks go
    on judging the values: the slip is recorded on the running check (:func:`note_slip`) and the
    values come back as the asked kind. A wrong shape, or values the asked kind cannot hold
    exactly, is a wrong answer.
    """
    wanted = {"b": "bool", "i": "int", "u": "uint", "f": "float"}
    want = " or ".join(wanted[k] for k in kind) + f" array of shape {tuple(shape)}"
    if isinstance(value, np.ndarray) and value.dtype.kind in kind and value.shape == tuple(shape):
        return value
    asked = f"{_article(want)} {want}" if isinstance(value, np.ndarray) else f"a numpy {want}"
    as_asked = _as_kind(value, kind, tuple(shape))
    if as_asked is None:
        fail(f"{call} returned {summarize(value)}; expected {asked}", case)
    note_slip(f"{call} returned {summarize(value)}; expected {asked}, and its values are right (a container "
              "or dtype slip)", slips)
    return as_asked


# The stateful exercises read every returned value as values with ``as_array`` (any container that
# holds the right shape of numbers) and hold the exact container and dtype in one check of their
# own (``returns_arrays``) with ``container_slip``: section 1's slip, judged once, not per call.


def as_array(value, *, call: str, shape: tuple, kind: str, case: dict | None = None) -> np.ndarray:
    """``value`` as an ndarray of ``shape`` whose dtype kind is one of ``kind`` ("i" ints, "f"
    floats; ints are accepted where floats are asked): a list or tuple of such numbers is read
    as one. Anything else (a wrong shape, strings, None) fails as a wrong answer."""
    array = value
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            array = None
        if array is not None and array.size == 0:  # [] reads as float64: an empty list holds any kind
            array = array.astype(np.int64 if "i" in kind else np.float64)
    allowed = set(kind) | ({"u"} if "i" in kind else set()) | ({"i", "u"} if "f" in kind else set())
    if not isinstance(array, np.ndarray) or array.dtype.kind not in allowed or array.shape != tuple(shape):
        what = "ints" if kind == "i" else "floats"
        fail(f"{call} returned {describe(value)}; expected {what} of shape {tuple(shape)}", case)
    return array


def container_slip(value, *, call: str, dtype) -> str | None:
    """What is wrong with the container of a value whose numbers are right, or None."""
    dtype = np.dtype(dtype)
    if not isinstance(value, np.ndarray):
        return f"{call} returned {describe(value)}; expected a numpy {dtype} array"
    if value.dtype != dtype:
        return f"{call} returned {describe(value)}; expected {dtype}"
    return None


def _as_kind(value, kind: str, shape: tuple) -> np.ndarray | None:
    """``value`` as an array of the asked kind and shape when that keeps every value exactly, else None."""
    if isinstance(value, RemoteObject):
        return None
    try:
        array = np.asarray(value)
    except (ValueError, TypeError, OverflowError):
        return None
    if isinstance(value, (list, tuple)) and array.size == 0 and shape and array.shape[:1] == shape[:1] == (0,):
        array = array.reshape(shape)  # a list of no rows cannot show its other axes
    if array.shape != shape or array.dtype.kind not in "biuf":
        return None
    target = {"b": np.bool_, "i": np.int64, "u": np.int64, "f": np.float64}[kind[0]]
    with np.errstate(all="ignore"):
        converted = array.astype(target)
        exact = np.array_equal(converted.astype(np.float64), array.astype(np.float64), equal_nan=True)
    return converted if exact else None


def note_slip(message: str, slips: list | None = None):
    """Record a hygiene slip in ``slips``, by default the running check's: the check fails as
    "hygiene" (cap hire) if nothing worse does."""
    if slips is None and _running is not None:
        slips = _running.slips
    if slips is not None:
        slips.append(message)


def allowing_empty(ex, call, *, empty: bool, what: str, stand_in):
    """``call()``, a valid call. When ``empty`` (it has a size of 0 where the contract sets no lower bound, which
    section 1 allows), a ValueError raised on purpose by the candidate's own module is a refusal too strict: a
    hygiene slip noted on the running check, and ``stand_in()`` (the right empty answer) is returned for the
    check to judge. A ValueError from inside a library (numpy's reduction of nothing) or any other exception
    propagates: a crash on an allowed input is wrong. (The child names the raising file: forging it buys
    nothing a deliberate refusal does not.)"""
    if not empty:
        return call()
    try:
        return call()
    except CandidateRaised as exc:
        if not (exc.is_a("ValueError") and exc.where.startswith(f"{ex.exercise.id}.py:")):
            raise
        note_slip(f"{what} raised ValueError ({exc.message[:120]}): a size of 0 is valid where the contract sets "
                  "no lower bound (a check too strict)")
        return stand_in()


def expect_raises(fn, *args, exception: str = "ValueError", call: str, case=None, **kwargs):
    """Calling ``fn`` in the candidate must raise ``exception`` (or a subclass of it); what it did
    instead is described as in :func:`expect_rejected`, without naming a diagnosis."""
    try:
        value = fn(*args, **kwargs)
    except CandidateRaised as exc:
        if exc.is_a(exception):
            return _said_what(exc, call)
        _raised_instead(None, exc, call, exception, case)
    fail(f"{call} returned {summarize(value)}; expected it to raise {exception}", case, kind="hygiene")


WRONG_REJECTIONS = ("TypeError", "AssertionError")  # deliberate rejections, in another class than asked


SHOWN = "the public tests show this call rejected"
"""The ``why`` of each exercise's ``rejects_the_invalid_case_shown``: the invalid call its public
tests show. It is a check of its own, outside the rubric's validation criteria, so a live grading
(which leaves the rest of validation to the interviewer) still judges what the prompt shows."""


def all_refused(calls) -> bool:
    """Make each of ``calls`` ((call, what) pairs: invalid calls) until one is accepted: whether every one raised.
    The checks that judge valid calls after rejected ones use it (an accepted one is the validation check's)."""
    for call, _ in calls:
        try:
            call()
        except CandidateRaised:
            continue
        return False
    return True


def expect_rejected(ex: ExerciseRun, fn, *args, call: str, diagnosis: str,
                    why: str = "invalid arguments must be rejected, not given a silent answer", case=None, **kwargs):
    """Invalid arguments: calling ``fn`` must raise ValueError. The failure says what the call did,
    and missing validation caps at hire whatever form it takes (issue 22: a strong engineer who
    validates less is hire, never weak): it returned a value, or fell over with another error
    (IndexError, AttributeError...): ``diagnosis``, the exercise's own id named at the call so the
    rubric's ids can be found in its checks, is named with a sentence saying which, as hygiene; it
    rejected them with TypeError or an assertion (hygiene, nothing named); it reached one of the
    child's limits, or is not implemented (a crash that says so). Timeouts and deaths propagate
    as crashes. Checks of the state after a rejected call are separate."""
    try:
        value = fn(*args, **kwargs)
    except CandidateRaised as exc:
        if exc.is_a("ValueError"):
            return _said_what(exc, call)
        _raised_instead(ex, exc, call, "ValueError", case, diagnosis, why)
    ex.diagnose(diagnosis, f"{call} did not raise ValueError: {why}")
    fail(f"{call} returned {summarize(value)}; expected it to raise ValueError", case, kind="hygiene")


def _said_what(exc: CandidateRaised, call: str) -> CandidateRaised:
    """A rejection with no message is a hygiene slip: section 1 asks for one that says what is wrong."""
    if not exc.message.strip():
        note_slip(f"{call} raised {exc.type_name} with no message; the contract asks for one that says what is wrong")
    return exc


def _raised_instead(ex, exc: CandidateRaised, call: str, expected: str, case, diagnosis=None, why=""):
    """Fail for a call that raised ``exc`` where ``expected`` was due, saying what happened."""
    if exc.bound:
        fail(f"{call} raised {exc.type_name}: it reached {exc.bound} ({exc.message[:120]})", case, kind="crash")
    if exc.is_a("NotImplementedError"):
        fail(f"{call} crashed with {exc.type_name} ({exc.message[:120]}) where it should raise {expected}", case,
             kind="crash")
    if any(exc.is_a(name) for name in WRONG_REJECTIONS):
        fail(f"{call} raised {exc.type_name} ({exc.message[:120]}); expected {expected}", case, kind="hygiene")
    if diagnosis:
        ex.diagnose(diagnosis, f"{call} raised {exc.type_name} instead of {expected}: {why}")
    fail(f"{call} raised {exc.type_name} ({exc.message[:120]}) where it should raise {expected}: the "
         "arguments were not validated", case, kind="hygiene")


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
    """Around calls passing numpy integers (or lists where the contract allows them), made after
    the same calls with Python ints and lists were judged: a ValueError or TypeError rejecting
    them is a hygiene slip, stated as ``rejected`` (one rule for every exercise: a type check too
    strict, the values never in doubt); any other exception on these valid inputs propagates and
    counts as a crash."""
    try:
        yield
    except CandidateRaised as exc:
        if not rejects_argument_type(exc):
            raise
        fail(f"{rejected} ({exc.message[:120]}); the contract accepts numpy integers wherever an int is "
             "asked for, and lists wherever an index array is", case, kind="hygiene")


def in_usual_types(call_given, call_usual, *, sent, what: str, slips: list | None = None):
    """The answer to ``call_given``, inside a value check. ``sent``: the integer arguments it
    passes. When one of them takes a type the contract allows besides the usual one (a numpy
    integer scalar, a list where an index array is asked), a ValueError or TypeError from it,
    where ``call_usual`` (the same values as Python ints and int64 arrays) is answered, is a
    hygiene slip, noted on the running check (:func:`note_slip`), and the values are judged on
    the usual answer; any other exception propagates, as does one from the usual call (then the
    values themselves were refused). Sent in the usual types, an int array of a narrow dtype
    included, the call is judged as given: failing on a narrow dtype where int64 works is wrong."""
    if not any(_unusual_type(value) for value in sent):
        return call_given()
    try:
        return call_given()
    except CandidateRaised as exc:
        if not rejects_argument_type(exc):
            raise
        answer = call_usual()
        note_slip(f"{what} raised {exc.type_name} ({exc.message[:120]}), where the same values as Python ints and "
                  "int64 arrays were answered: numpy integers and lists for index arrays are valid (a type check "
                  "too strict)", slips)
        return answer


def _unusual_type(value) -> bool:
    """A numpy integer scalar, or a list (or a tuple holding one): section 1's other argument types."""
    if isinstance(value, np.integer) or isinstance(value, list):
        return True
    return isinstance(value, tuple) and any(_unusual_type(v) for v in value)


def rejects_argument_type(exc: CandidateRaised) -> bool:
    """The exceptions an answer raises on purpose for an argument type it does not accept."""
    return exc.is_a("ValueError") or exc.is_a("TypeError")


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


def tolerance(inputs=(), magnitude=1.0, scale=1.0):
    """Section 1's absolute tolerance for values of size ``scale`` computed from ``inputs``
    whose scores or lse reach ``magnitude``. Arrays of magnitudes and scales (one per row: the
    values involved in that row) give an array of tolerances; scalars give a float."""
    m = np.abs(np.asarray(magnitude, dtype=np.float64))
    m = np.where(np.isfinite(m), m, 1.0)
    tol = PRECISION * input_eps(*inputs) * np.maximum(1.0, m) * np.maximum(1.0, np.abs(np.asarray(scale, float)))
    return float(tol) if tol.ndim == 0 else tol


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


# -- evidence: memory, warnings and CPU time -------------------------------------------------------


def measure(ex: ExerciseRun, target, name: str, *args, memory: bool = True, on_state: bool = False, **kwargs):
    """(value, bytes over the budget's base or None, reported warnings) of ``target.name(*args, **kwargs)``.

    The one place a check takes memory and warnings. The call is an ordinary call (nothing tells
    the child it is measured) and its value is returned for the check to compare like any other.
    Memory is the kernel's figure for the child's whole footprint over the whole request
    (``target.measured``: a cgroup's peak, or the child's own high-water mark where no cgroup can
    be had), memory held since import included. The figure returned is what is left of that peak
    after the base every answer may use: a kit-only child's footprint measured in the same run
    (``Sandbox.floor_bytes``), the arguments as received and as float64 copies (a cast or a defensive
    copy of its inputs is no forbidden array), twice the answer's own size, and the
    results the child holds for the ownership probes (``wire.HELD_BYTES``). A call
    on state (``on_state``) is judged on what it added over the footprint the kernel saw as the
    request was written: what the cache held before is its storage, however large (a cache
    preallocated for 4,096 positions, as Hugging Face's static cache is, is no per-step copy; a red
    team's was graded one when held memory counted). A cache that frees spare memory during a call,
    or copies into room it holds, can hide a copy there: a limit the README states.
    Checks compare the figure with what their must-not would cost. ``memory=False`` takes the warnings only
    (``target.with_stats``). None means nothing could be measured, never "fine". Warnings are what
    the child reports: they may count against a candidate, never for one. A call that runs out of
    memory is a broken must-not (the allocation was too large), not a crash.
    """
    if memory and not getattr(ex, "measures_memory", True):  # a kit mistake: no floor launched, no collection made
        raise RuntimeError(f"measure({name}) with memory in a checks module that says MEASURES_MEMORY = False")
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
    given = (args, kwargs)
    allowed = _data_bytes(given) + _data_bytes(given, widened=True) + 2 * _data_bytes(value)
    over = _over_base(ex, stats, allowed, on_state) if memory else None
    return value, over, list(stats.warnings)


@contextlib.contextmanager
def past_int64(what: str):
    """Cases whose sizes, or the sums an answer forms from them, pass int64 (a window of 2^63, S = 2^63 - 1
    with blocks of 2^62). Section 1 allows them, so they are asked; an answer right for every size int64
    holds is not wrong for any input a model meets, so a failure here, a wrong value or an error, is a
    hygiene failure (it caps at hire), and says so."""
    try:
        yield
    except CheckFailure as failure:
        fail(f"{failure.message} [{what}: right for sizes int64 holds, not past it: hygiene, caps at hire]",
             failure.case, failure.picture, kind="hygiene")
    except CandidateRaised as error:
        fail(f"{error} [{what}: Python ints hold any size; arithmetic in int64 overflows past 2^63 - 1: "
             "hygiene, caps at hire]", kind="hygiene")


def misfit_calls(name: str, arg_names: list, axes: list, arrays: list, pack: Callable):
    """(function name, arguments, call text) for every way to break one argument's shape that numpy would
    still broadcast against the others: an axis whose name another argument's axis shares set to 1, a shared
    leading axis dropped, a leading axis of 1 added (each a shape check that compares only the last axis,
    or only ndim, misses). ``axes``: each argument's axis names (one name, one size); ``arrays``: a valid
    call's arguments; ``pack`` turns the list of arrays into the call's arguments."""
    names = [axis for arg in axes for axis in arg]
    shared = {axis for axis in names if names.count(axis) > 1}
    for i, arg in enumerate(axes):
        changes = [(lambda x, j=j: x[(slice(None),) * j + (slice(0, 1),)], f"{axis} = 1")
                   for j, axis in enumerate(arg) if axis in shared]
        if arg and arg[0] in shared:
            changes.append((lambda x: x[0], "its leading axis dropped"))
        changes.append((lambda x: x[None], "a leading axis of 1 added"))
        for change, what in changes:
            args = arrays[:i] + [change(arrays[i])] + arrays[i + 1:]
            shapes = ", ".join(f"{a} {list(x.shape)}" for a, x in zip(arg_names, args))
            yield name, pack(args), f"{name}({shapes}): {arg_names[i]} with {what}"


def middle_reading(limit: float, reading, times: int = 3) -> tuple | None:
    """A must-not's middle reading: ``(figure, detail)`` of the middle of up to ``times`` readings, or None
    when nothing was measured. ``reading()`` makes one measured call (:func:`measure`), whose answer is judged
    like any other, and returns ``(figure, detail)`` (the detail, such as the case, names the call in a
    failure) or None. Readings stop once most of them fall on one side of ``limit``: the rest could not move
    the middle across it.

    Why never one reading, nor the least of two: a stray charge (the kernel counts the whole cgroup) once
    read a correct answer over its bound, so one high figure cannot fail; and an answer that builds the
    forbidden array on every call but the few it can tell apart (its process's first, or one repeating the
    call before) must not pass on those. So ``reading`` draws fresh shapes and values every time (a repeat is
    a call an answer can recognise), and an answer fails when most of its readings reach the bound. A reading
    may return a figure scaled to its own shapes, judged against the same ``limit``."""
    readings, most = [], times // 2 + 1
    for _ in range(times):
        read = reading()
        if read is not None:
            readings.append(read)
        if max(sum(f >= limit for f, _ in readings), sum(f < limit for f, _ in readings)) >= most:
            break
    return sorted(readings, key=lambda r: r[0])[(len(readings) - 1) // 2] if readings else None


def _over_base(ex, stats, data: int, on_state: bool) -> int | None:
    if on_state:  # what the call added to the footprint it began with
        if None in (stats.peak_bytes, stats.before_bytes):
            return None
        return max(0, stats.peak_bytes - stats.before_bytes - data)
    floor = ex.sandbox.floor_bytes() if stats.peak_bytes is not None else None
    return None if floor is None else max(0, stats.peak_bytes - floor - data - HELD_BYTES)


def _data_bytes(value, widened: bool = False) -> int:
    """The bytes of the arrays in ``value``; ``widened``: of copies of them at 8 bytes an element."""
    if isinstance(value, np.ndarray):
        return value.size * max(8, value.itemsize) if widened else value.nbytes
    if isinstance(value, (list, tuple)):
        return sum(_data_bytes(v, widened) for v in value)
    if isinstance(value, dict):
        return sum(_data_bytes(v, widened) for v in value.values())
    return 0


def child_cpu_seconds(ex: ExerciseRun) -> tuple[int, float] | None:
    """(the child's pid, the CPU time it and every process it started have used so far), or None where
    it cannot be read. The kernel's count (``launch.tree_cpu_seconds``), which candidate code cannot
    rewrite and load does not inflate as it does wall time (a waiting process accrues none); read from
    /proc it moves in clock ticks (10 ms), so a check times work of tens of milliseconds at least."""
    try:
        child = ex.sandbox.worker.child
        return child.pid, child.cpu_seconds()
    except (AttributeError, OSError, ValueError, IndexError):
        return None


class ChildCpu:
    """A meter of the child's CPU time from the moment it is made: ``used()`` is the seconds since, or
    None where either reading failed or the child was replaced in between."""

    def __init__(self, ex: ExerciseRun):
        self.ex, self.start = ex, child_cpu_seconds(ex)

    def used(self) -> float | None:
        now = child_cpu_seconds(self.ex)
        if self.start is None or now is None or now[0] != self.start[0]:
            return None
        return now[1] - self.start[1]


def cpu_of(ex: ExerciseRun, calls) -> float | None:
    """CPU seconds the child spent on ``calls()`` (None if unreadable, or if the child was replaced)."""
    meter = ChildCpu(ex)
    calls()
    return meter.used()


# -- diagnoses -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """A known-wrong version of one function: ``build(case)`` gives its output on ``case``
    (None where the mistake does not apply, a predicate where it allows many outputs: see
    :func:`fits`), ``sentence(case)`` names it in that case."""

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
    """Does ``got`` on ``case`` look like ``variant``'s answer (and unlike the right one there)?

    A variant whose mistake allows many answers (masking more tiles than needed, in any pattern)
    builds a predicate instead of an answer: ``build(case)(got)`` says whether ``got`` shows it.
    """
    wrong = variant.build(case)
    if callable(wrong):
        return bool(wrong(got)) and not (right and wrong(right(case)))
    return wrong is not None and same(got, wrong, case) and not (right and same(right(case), wrong, case))


def explain(variants: list, failures: list, right: Callable | None = None,
            same: Callable = _equal, passes: list = ()) -> Explanation:
    """Which known mistakes explain ``failures``, a list of (case, submitted output)?

    ``same(got, wrong, case)`` compares (exact by default); a variant equal to ``right(case)``
    fits nothing there. ``passes``, cases the submission got right, refute any variant that
    would have got one of them wrong: a mistake the answer made would have shown there too.
    The naming rule is :func:`explain_fits`'.
    """
    if right is not None:
        variants = [v for v in variants if not any(_wrong_on(v, case, right, same) for case in passes)]
    fitted: dict[str, list] = {}
    for v in variants:
        row = [v.sentence(case) if fits(v, case, got, right, same) else None for case, got in failures]
        merged = fitted.setdefault(v.id, [None] * len(failures))  # two variants of one id: either may fit
        fitted[v.id] = [a if a is not None else b for a, b in zip(merged, row)]
    return explain_fits(fitted)


def _wrong_on(variant: Variant, case, right: Callable, same: Callable) -> bool:
    """Would ``variant`` (an exact one) have answered ``case`` differently from the right answer?"""
    wrong = variant.build(case)
    return wrong is not None and not callable(wrong) and not same(right(case), wrong, case)


def explain_fits(fitted: dict[str, list]) -> Explanation:
    """The one naming rule of the kit. ``fitted`` maps a diagnosis id to, for each failing case in
    order, the sentence naming it there when the mistake fits that case, else None.

    A mistake is named only when it explains EVERY failing case, so the name cannot change with
    the seed's choice of cases; when several do (attention-gym's block mask is both top-left and
    tile-index aligned), each is named. Failing that, two mistakes that together cover every
    case (each fitting some) are both named. Otherwise one fitting case gives only a hint.
    """
    fitted = {i: row for i, row in fitted.items() if any(s is not None for s in row)}
    whole = [(i, next(s for s in row if s is not None)) for i, row in fitted.items()
             if all(s is not None for s in row)]
    if whole:
        return Explanation(whole)
    ids = list(fitted)
    for a, b in ((a, b) for n, a in enumerate(ids) for b in ids[n + 1:]):
        if all(x is not None or y is not None for x, y in zip(fitted[a], fitted[b])):
            return Explanation([(i, next(s for s in fitted[i] if s is not None)) for i in (a, b)])
    for i, row in fitted.items():
        if any(s is not None for s in row):
            return Explanation([], f"consistent with {i.replace('_', ' ')} in this case")
    return Explanation([])


def name_mistakes(ex: ExerciseRun, explanation: Explanation) -> str:
    """Record the named mistakes on ``ex``; the text to append to a failure message. None is named once
    the module has handed back an array the grader had written over (a memo handed out writable): its
    wrong values may be that write, which can look like any mistake."""
    again = getattr(getattr(getattr(ex, "sandbox", None), "ownership", None), "again", None)
    if again and (explanation.named or explanation.hint):
        earlier, later = again[0]
        return (f"; no mistake named: a later {later} handed back the array an earlier {earlier} had returned, "
                "which the grader had since written over (as a caller may), so wrong values here may be that "
                "write (see results_belong_to_the_caller)")
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
    """Fail with the smallest miss (``None`` entries are cases that passed), naming mistakes by
    :func:`explain_fits` over every miss of the check (each miss lists the mistakes that fit it)."""
    misses = sorted((m for m in misses if m is not None), key=lambda m: m.size)
    if not misses:
        return
    fitted: dict[str, list] = {}
    for n, miss in enumerate(misses):
        for diagnosis_id, sentence in miss.found:
            fitted.setdefault(diagnosis_id, [None] * len(misses))[n] = sentence
    smallest = misses[0]
    fail(smallest.message + name_mistakes(ex, explain_fits(fitted)), case=smallest.case, kind=smallest.kind)


# -- values: section 1's extreme inputs and containers ----------------------------------------------

GARBAGE_MAGNITUDE = 1e30  # section 1: a slot never attended may hold any finite value, 1e30 included


def same_bytes(values, wide=np.int64, narrow=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as a ``wide`` integer array, and its bytes read as ``narrow`` (more, smaller integers, each
    value followed by its sign's bytes): two calls that a memo keyed on an array's bytes, without its dtype
    or length, takes for one (calls in any order)."""
    array = np.array(values, wide)
    return array, array.view(narrow).copy()


def error_of(got, want, **reduce) -> np.ndarray:
    """The largest |got - want| (over ``reduce``'s axis: ``axis=1`` per row), a NaN counting as infinitely off."""
    return np.nan_to_num(np.abs(np.subtract(got, want)), nan=np.inf).max(**reduce)


def garbage(rng: np.random.Generator, shape, dtype=np.float64, beyond_float32: bool = False) -> np.ndarray:
    """Finite values of every magnitude up to 1e30, both signs, for slots no query may attend
    (masked keys, empty or stale slots, padding, beyond a sequence's length). ``beyond_float32``
    (float64 data beside float32 inputs): half of them 1e39 .. 1e300 instead, finite and so allowed,
    but inf once cast down to float32, where an answer that casts before masking gets 0 * inf = NaN."""
    exponent = rng.integers(0, 31, shape)
    values = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.1, 1.0, shape) * 10.0 ** exponent
    values.flat[: min(values.size, 2)] = [GARBAGE_MAGNITUDE, -GARBAGE_MAGNITUDE][: min(values.size, 2)]
    if beyond_float32:
        huge = rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(39, 300, shape)
        values = np.where(rng.random(shape) < 0.5, huge, values)
    return values.astype(dtype)


def edge_windows(S: int, T: int) -> list:
    """The window sizes where the oldest of S contiguous keys enters or leaves the view of the first or the last
    of the T newest queries (one apart around S - T and S), those >= 1: where a shortcut such as "a window of
    S - 1 or more is no window" goes wrong by one."""
    return [W for W in sorted({S - T, S - T + 1, S - 1, S, S + 1}) if W >= 1]


def offset_scores(rng: np.random.Generator, offsets, n: int, D: int, dtype=np.float64, spread: float = 1.0):
    """(q [T, D], k [n, D]) whose scaled scores q k^T / sqrt(D) in row i are ``offsets[i]`` plus a
    spread of about ``spread``: rows far above or far below 0 (section 1 allows [-1e4, 1e4], and a
    row whose visible scores are all below -745 still has a softmax), built from ordinary keys."""
    offsets = np.asarray(offsets, dtype=np.float64)
    q = rng.standard_normal((len(offsets), D)) * spread
    k = rng.standard_normal((n, D))
    k[:, 0] = 1.0
    q[:, 0] = offsets * np.sqrt(D)
    return q.astype(dtype), k.astype(dtype)


def received(value, *, call: str, shape: tuple, kind: str, slips: list | None = None, dtype=None,
             case: dict | None = None) -> np.ndarray:
    """:func:`expect_array`, and where the prompt fixes the dtype (``dtype``), another float or int
    dtype of the same values is a slip too (a float32 output where float64 is asked). Slips go to
    the running check (:func:`note_slip`); ``slips`` is that same list (:func:`slips_of`)."""
    array = expect_array(value, call=call, shape=shape, kind=kind, case=case, slips=slips)
    want = np.dtype(dtype) if dtype is not None else None
    if want is None or array.dtype == want:
        return array
    note_slip(f"{call} returned {_article(str(array.dtype))} {array.dtype} array; expected {want}", slips)
    with np.errstate(all="ignore"):
        return array.astype(want)


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
