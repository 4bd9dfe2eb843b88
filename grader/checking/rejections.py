"""Invalid arguments: what a rejection must be (ValueError, with a message), the calls shapes numpy
would broadcast, sizes past int64, and argument types other than the usual."""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from ..sandbox import CandidateRaised
from .run import CheckFailure, ExerciseRun, fail, note_slip
from .values import summarize


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
