"""The data-only wire between the grader and a candidate child process.

A message is one frame: an 8-byte big-endian length, then a JSON header, then the arrays
it refers to as ``.npy`` bytes, each behind its own length. Arrays are read back with
``allow_pickle=False``, so no frame can carry code. Every length is capped.

This file is also copied into the child's scratch directory and imported there, so it
depends on nothing but the standard library and numpy.
"""
from __future__ import annotations

import io
import json
import os
import struct

import numpy as np

MAX_FRAME_BYTES = 512 * 1024 * 1024  # one header or one array
_LEN = struct.Struct(">Q")


class WireError(Exception):
    """A frame that is malformed, too large, or holds something the wire does not carry."""


# -- values <-> JSON-able trees -------------------------------------------------------------
# JSON carries None, bool, int, float (inf and nan included), str, list and dict with str keys.
# Tagged dicts carry the rest: {"$nd": i} the i-th array of the frame, {"$tuple": [...]},
# {"$obj": id} an object living in the child, {"$host": id, ...} an object living in the grader.


def encode(value, arrays: list, export=None):
    """Turn ``value`` into a JSON-able tree, appending arrays to ``arrays``.

    ``export(value)`` is asked for anything else and returns a tagged dict, or None to refuse.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise WireError(f"an array of Python objects ({arr.dtype}) cannot cross the wire")
        arrays.append(arr)
        return {"$nd": len(arrays) - 1, "scalar": isinstance(value, np.generic)}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, arrays, export) for v in value]}
    if isinstance(value, list):
        return [encode(v, arrays, export) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) and not k.startswith("$") for k in value):
        return {k: encode(v, arrays, export) for k, v in value.items()}
    tagged = export(value) if export else None
    if tagged is None:
        raise WireError(f"a value of type {type(value).__name__} cannot cross the wire")
    return tagged


def decode(tree, arrays: list, resolve=None):
    """Inverse of :func:`encode`; ``resolve(tagged, arrays)`` rebuilds object references."""
    if isinstance(tree, list):
        return [decode(v, arrays, resolve) for v in tree]
    if not isinstance(tree, dict):
        return tree
    if "$nd" in tree:
        index = tree["$nd"]
        if not isinstance(index, int) or not 0 <= index < len(arrays):
            raise WireError("a frame refers to an array it does not hold")
        arr = arrays[index]
        return arr[()] if tree.get("scalar") else arr
    if "$tuple" in tree:
        return tuple(decode(v, arrays, resolve) for v in tree["$tuple"])
    if any(k.startswith("$") for k in tree):
        if resolve is None:
            raise WireError(f"unexpected object reference {sorted(tree)}")
        return resolve(tree, arrays)
    return {k: decode(v, arrays, resolve) for k, v in tree.items()}


# -- frames -------------------------------------------------------------------------------


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    try:
        np.save(buf, arr, allow_pickle=False)  # 0-d arrays stay 0-d (ascontiguousarray would not)
    except ValueError as exc:
        raise WireError(str(exc)) from None
    return buf.getvalue()


def pack(header: dict, arrays: list) -> bytes:
    """One frame: the JSON header (with the array count) and the arrays."""
    header = dict(header, arrays=len(arrays))
    parts = [json.dumps(header, allow_nan=True).encode()]
    parts += [_npy_bytes(a) for a in arrays]
    out = bytearray()
    for part in parts:
        if len(part) > MAX_FRAME_BYTES:
            raise WireError(f"a message part of {len(part):,} bytes exceeds the cap")
        out += _LEN.pack(len(part)) + part
    return bytes(out)


def _read_exact(fd: int, n: int, read=os.read) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_part(fd: int, read) -> bytes:
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, read))
    if n > MAX_FRAME_BYTES:
        raise WireError(f"a message part announces {n:,} bytes, over the cap")
    return _read_exact(fd, n, read)


def read_frame(fd: int, read=os.read) -> tuple[dict, list]:
    """Read one frame: (header, arrays). ``read`` may enforce a deadline."""
    try:
        header = json.loads(_read_part(fd, read))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"a message header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), int):
        raise WireError("a message header is not a JSON object with an array count")
    arrays = []
    for _ in range(header["arrays"]):
        try:
            arrays.append(np.load(io.BytesIO(_read_part(fd, read)), allow_pickle=False))
        except (ValueError, OSError) as exc:
            raise WireError(f"an array in a message is not valid .npy data: {exc}") from None
    return header, arrays


def write_frame(fd: int, header: dict, arrays: list) -> None:
    data = memoryview(pack(header, arrays))
    while data:
        data = data[os.write(fd, data):]
