"""Judging returned values: containers and dtypes (section 1's slips), the one describer, and
precision (section 1's rule, :data:`PRECISION`)."""
from __future__ import annotations

import numpy as np

from ..sandbox import RemoteObject
from .run import fail, note_slip


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


def close_rows(got, want, inputs=(), magnitude: float = 1.0) -> np.ndarray:
    """:func:`close` of each row (the last axis) of ``got`` against the same row of ``want``, the two broadcast
    together: one bool per row, each row's tolerance scaled by its own largest finite |want|, as ``close`` of
    that row alone would scale it."""
    got, want = np.broadcast_arrays(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64))
    finite = np.isfinite(want)
    scale = np.max(np.abs(np.where(finite, want, 0.0)), axis=-1, keepdims=True, initial=0.0)
    tol = tolerance(inputs, magnitude, scale)
    with np.errstate(invalid="ignore"):
        near = np.abs(got - want) <= tol
    return np.where(finite, near & np.isfinite(got), (got == want) | (np.isnan(got) & np.isnan(want))).all(axis=-1)


def same_bytes(values, wide=np.int64, narrow=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """``values`` as a ``wide`` integer array, and its bytes read as ``narrow`` (more, smaller integers, each
    value followed by its sign's bytes): two calls that a memo keyed on an array's bytes, without its dtype
    or length, takes for one (calls in any order)."""
    array = np.array(values, wide)
    return array, array.view(narrow).copy()


def error_of(got, want, **reduce) -> np.ndarray:
    """The largest |got - want| (over ``reduce``'s axis: ``axis=1`` per row), a NaN counting as infinitely off."""
    return np.nan_to_num(np.abs(np.subtract(got, want)), nan=np.inf).max(**reduce)


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
