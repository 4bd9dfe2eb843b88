"""Right values in the wrong container (CONTRACT section 1): read as values, judged apart.

A list of the right ints where an int64 array is asked for, or a float32 output where float64
is asked, is a hygiene slip: it caps at hire, and every other check goes on judging the values.
So checks read a returned value with :func:`as_array`, which accepts any container that holds
the right shape of numbers, and one check per exercise (``returns_arrays``) holds the exact
container and dtype with :func:`container_slip`.
"""
from __future__ import annotations

import numpy as np

from grader.checking import describe, fail


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
