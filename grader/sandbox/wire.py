"""The data-only wire between the grader and a candidate child process.

A message is one frame: an 8-byte big-endian length, then a JSON header, then the arrays
it refers to as ``.npy`` bytes, each behind its own length. Arrays are read back with
``allow_pickle=False``, so no frame can carry code. Every length is capped.

This file is also copied into the child's scratch directory and imported there, so it
depends on nothing but the standard library and numpy.
"""
from __future__ import annotations

import io
import os
import struct
import types

import numpy as np

try:  # CPython's C scanner and encoder, which json.loads and json.dumps run on
    from _json import encode_basestring_ascii as _c_quote
    from _json import make_encoder as _c_make_encoder
    from _json import make_scanner as _c_make_scanner
except ImportError:  # another Python: its json module does the same
    _c_make_encoder = _c_make_scanner = None
    import json as _json_module

MAX_FRAME_BYTES = 256 * 1024 * 1024  # one array
MAX_HEADER_BYTES = 16 * 1024 * 1024  # the JSON header of a message
MAX_MESSAGE_BYTES = 512 * 1024 * 1024  # a whole message: header and every array
MAX_ARRAYS = 4096  # arrays in one message
MAX_DEPTH = 64  # nesting of lists, tuples and dicts in a value
HELD_BYTES = 2 << 20  # results the child holds for the ownership probes: the grader's, never charged
NPY_HEADER_BYTES = 1 << 16  # an array's .npy header (magic, dtype, shape): numpy's own limit is smaller
MAX_ITEMS = 1 << 20  # JSON values in one header (each costs the reader a Python object)
STACKED_SLACK_BYTES = 16 << 20  # what a reply's arrays may take read together beyond twice their size
_LEN = struct.Struct(">Q")
_WHITESPACE = " \t\n\r"
_CONSTANTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


class WireError(Exception):
    """A frame that is malformed, too large, or holds something the wire does not carry."""


class Laid:
    """An array the reader receives in a layout of the writer's choosing: ``reversed`` sends it
    reversed along every axis and reads it back as a view that reverses it again (the same values
    with negative strides, in no more memory); ``read_only`` makes the reader's array read-only."""

    __slots__ = ("array", "reversed", "read_only")

    def __init__(self, array: np.ndarray, reversed: bool = False, read_only: bool = False):
        self.array = np.ascontiguousarray(np.flip(array)) if reversed else array
        self.reversed, self.read_only = reversed, read_only


LAYOUTS = ("C", "F", "reversed")
LENT_ALIGN = 64  # where every array a child receives starts: a lent one (shared.py) and a sent one alike


def over_memory(buffer, offset: int, dtype, shape: tuple, layout: str) -> np.ndarray:
    """The array of ``shape`` at ``offset`` of ``buffer`` in ``layout``: the one reading of a lent array's
    memory (``shared.py``), by the grader and by the child alike (numpy's own constructor and indexing only)."""
    arr = np.ndarray(shape, dtype, buffer=buffer, offset=offset, order="F" if layout == "F" else "C")
    return arr[(slice(None, None, -1),) * arr.ndim] if layout == "reversed" else arr


def mapped(value, leaf):
    """``value`` (arguments: lists, tuples and dicts of values) with ``leaf`` applied to every value that
    is not such a container: the one walk behind every way the grader lays out what it sends."""
    if isinstance(value, (list, tuple)):
        items = [mapped(v, leaf) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: mapped(v, leaf) for k, v in value.items()}
    return leaf(value)


def read_only(value):
    """``value`` with every array in it (in lists, tuples and dicts too) sent read-only."""
    return mapped(value, lambda v: Laid(v, read_only=True) if isinstance(v, np.ndarray) and v.ndim else v)


# -- values <-> JSON-able trees -------------------------------------------------------------
# JSON carries None, bool, int, float (inf and nan included), str, list and dict with str keys.
# Tagged dicts carry the rest: {"$nd": i} the i-th array of the frame (with "reversed" and
# "read_only", see Laid), {"$tuple": [...]},
# {"$obj": id} an object living in the child, {"$host": id, ...} an object living in the grader.


def encode(value, arrays: list, export=None, depth: int = 0):
    """Turn ``value`` into a JSON-able tree, appending arrays to ``arrays``.

    ``export(value)`` is asked for anything else and returns a tagged dict, or None to refuse.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"a value nested more than {MAX_DEPTH} levels deep cannot cross the wire")
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
    if isinstance(value, Laid):
        arrays.append(value.array)
        return {"$nd": len(arrays) - 1, "scalar": False, "reversed": value.reversed, "read_only": value.read_only}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, arrays, export, depth + 1) for v in value]}
    if isinstance(value, list):
        return [encode(v, arrays, export, depth + 1) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) and not k.startswith("$") for k in value):
        return {k: encode(v, arrays, export, depth + 1) for k, v in value.items()}
    tagged = export(value) if export else None
    if tagged is None:
        raise WireError(f"a value of type {type(value).__name__} cannot cross the wire")
    return tagged


def decode(tree, arrays: list, resolve=None, depth: int = 0, leaf=None):
    """Inverse of :func:`encode`; ``resolve(tagged, arrays)`` rebuilds object references; ``leaf(array)``,
    when given, is applied to every array as it is finally handed over (laid out, made read-only).

    Anything malformed (whoever wrote the frame) is a :class:`WireError`, never another error.
    """
    if depth > MAX_DEPTH:
        raise WireError(f"a value nested more than {MAX_DEPTH} levels deep")
    if isinstance(tree, list):
        return [decode(v, arrays, resolve, depth + 1, leaf) for v in tree]
    if not isinstance(tree, dict):
        if tree is None or isinstance(tree, (bool, int, float, str)):
            return tree
        raise WireError(f"a frame holds a {type(tree).__name__}")
    if "$nd" in tree:
        index = tree["$nd"]
        if type(index) is not int or not 0 <= index < len(arrays):
            raise WireError("a frame refers to an array it does not hold")
        arr = arrays[index]
        if tree.get("scalar"):
            if arr.ndim != 0:
                raise WireError("a scalar in a frame is not 0-dimensional")
            return arr[()]
        if tree.get("reversed") is True:
            arr = np.flip(arr)
        if tree.get("read_only") is True:
            arr = arr.view()
            arr.flags.writeable = False
        return arr if leaf is None else leaf(arr)
    if "$tuple" in tree:
        if not isinstance(tree["$tuple"], list):
            raise WireError("a tuple in a frame is not a list")
        return tuple(decode(v, arrays, resolve, depth + 1, leaf) for v in tree["$tuple"])
    if any(k.startswith("$") for k in tree):
        if resolve is None:
            raise WireError(f"unexpected object reference {sorted(tree)[:5]}")
        return resolve(tree, arrays)
    return {k: decode(v, arrays, resolve, depth + 1, leaf) for k, v in tree.items()}


# -- JSON ----------------------------------------------------------------------------------
# Straight on CPython's C scanner and encoder, as json.loads and json.dumps use them, without the
# json module's Python layer: in the child that layer belongs to the candidate's process too, and a
# ``json.JSONEncoder.encode = ...`` there would rewrite every header the child sends. Functions
# bound when this file is loaded, before any candidate code runs, are not reached by such a patch.


def _no_default(value):
    raise TypeError(f"a {type(value).__name__} is not JSON")


def _dumps(value) -> str:
    """``json.dumps(value)`` (ASCII, NaN and infinities allowed, circular references refused)."""
    if _c_make_encoder is None:
        return _json_module.dumps(value, allow_nan=True)
    encode = _c_make_encoder({}, _no_default, _c_quote, None, ": ", ", ", False, False, True)
    return "".join(encode(value, 0))


# One scanner for every frame, as json.loads keeps one (it clears its key memo after each value). An
# encoder is made per value, as json.dumps does: its markers (for circular references) must start empty.
_scan = _c_make_scanner and _c_make_scanner(types.SimpleNamespace(
    strict=True, object_hook=None, object_pairs_hook=None, parse_float=float, parse_int=int,
    parse_constant=_CONSTANTS.__getitem__, memo={}))


def _loads(raw) -> object:
    """``json.loads`` of UTF-8 bytes: one JSON value, nothing but whitespace around it."""
    text = (raw if isinstance(raw, str) else raw.decode("utf-8")).strip(_WHITESPACE)
    if _scan is None:
        return _json_module.loads(text)
    try:
        value, end = _scan(text, 0)
    except StopIteration as stop:
        raise ValueError(f"no JSON value at character {stop.value}") from None
    if end != len(text):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return value


# -- frames -------------------------------------------------------------------------------


def frame_parts(header: dict, arrays: list) -> list:
    """One frame as the buffers to write in turn: the length-prefixed JSON header (with the array
    count), then each array's length-prefixed .npy header and body. A contiguous array's body is
    its own memory, not a copy: a message costs its writer nothing beyond what it carries."""
    head = _dumps(dict(header, arrays=len(arrays))).encode()
    if len(head) > MAX_HEADER_BYTES:
        raise WireError(f"a message header of {len(head):,} bytes exceeds the cap")
    if len(arrays) > MAX_ARRAYS:
        raise WireError(f"a message of {len(arrays)} arrays exceeds the cap")
    npy = [_npy_parts(a) for a in arrays]
    sizes = [len(npy_head) + n for npy_head, _, n in npy]
    if sum(sizes) > MAX_MESSAGE_BYTES:
        raise WireError(f"a message of {len(arrays)} arrays and {sum(sizes):,} bytes exceeds the cap")
    if max(sizes, default=0) > MAX_FRAME_BYTES:
        raise WireError(f"an array of {max(sizes):,} bytes exceeds the cap")
    parts = [_LEN.pack(len(head)) + head]
    for (npy_head, body, _), size in zip(npy, sizes):
        parts += [_LEN.pack(size) + npy_head, body]
    return parts


def pack(header: dict, arrays: list) -> bytes:
    """One frame in one buffer (small messages, and the tests' side of the black box)."""
    return b"".join(frame_parts(header, arrays))


def _read_exact(fd: int, n: int, read=os.read, align: int = 0):
    """``n`` bytes into one buffer allocated once (a message costs its size, not twice that); ``align``:
    a view of a buffer starting at an address that is a multiple of it (a bytearray over-allocated by
    ``align - 1`` bytes), else the bytearray itself."""
    if align:
        whole = bytearray(n + align - 1)
        shift = -np.frombuffer(whole, np.uint8).__array_interface__["data"][0] % align
        out = memoryview(whole)[shift:shift + n]
    else:
        out = bytearray(n)
    got = 0
    while got < n:
        chunk = read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        out[got:got + len(chunk)] = chunk
        got += len(chunk)
    return out


def _read_part(fd: int, read, cap: int, align: int = 0):
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, read))
    if n > cap:
        raise WireError(f"a message part announces {n:,} bytes, over the cap of {cap:,}")
    return _read_exact(fd, n, read, align)


def _array(buf: bytearray) -> np.ndarray:
    """A .npy part as an array, strictly: no pickles, no object dtypes, exactly the bytes announced.
    The array is a view of ``buf``; only the .npy header is copied, to be parsed."""
    stream = io.BytesIO(bytes(memoryview(buf)[:NPY_HEADER_BYTES]))
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except (ValueError, TypeError, SyntaxError, OverflowError, MemoryError) as exc:
        raise WireError(f"an array in a message is not valid .npy data: {exc}") from None
    if dtype.hasobject:
        raise WireError(f"an array of Python objects ({dtype}) cannot cross the wire")
    if any(n < 0 for n in shape):  # numpy's header parser lets them through; a count could still match
        raise WireError(f"an array announces shape {shape}, with a negative length")
    count = 1
    for n in shape:
        count *= n
    offset = stream.tell()
    if count * dtype.itemsize != len(buf) - offset:
        raise WireError(f"an array announces shape {shape} of {dtype} but carries "
                        f"{len(buf) - offset:,} bytes")
    flat = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)  # writable: buf is a bytearray
    try:
        return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    except ValueError as exc:  # a shape numpy cannot hold, such as (2**62, 0, 2**62)
        raise WireError(f"an array announces shape {shape}, which numpy cannot make: {exc}") from None


def _check_items(raw: bytearray) -> None:
    """Refuse a header that would expand into more than MAX_ITEMS objects, before parsing it: a
    16 MB header of ``[{}, {}, ...]`` is 4 million dicts. Every value but the first follows a
    comma, and an empty container holds none, so commas plus brackets bound the count (from
    above: a comma or bracket inside a string is counted too)."""
    count = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if count > MAX_ITEMS:
        raise WireError(f"a message header of {len(raw):,} bytes holds up to {count:,} values, over the cap of "
                        f"{MAX_ITEMS:,}")


def read_frame(fd: int, read=os.read, align: int = 0) -> tuple[dict, list]:
    """Read one frame: (header, arrays). ``read`` may enforce a deadline. ``align``: each array's data
    starts at an address that is a multiple of it (a .npy header pads the data to 64 bytes from the
    part's start), as the child's arrays do, lent or sent alike (``child.Host.receive``)."""
    raw = _read_part(fd, read, MAX_HEADER_BYTES)
    _check_items(raw)
    try:
        header = _loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise WireError(f"a message header is not JSON: {str(exc)[:200]}") from None
    count = header.get("arrays") if isinstance(header, dict) else None
    if type(count) is not int or not 0 <= count <= MAX_ARRAYS:
        raise WireError("a message header is not a JSON object with a valid array count")
    arrays, total = [], 0
    for _ in range(count):
        part = _read_part(fd, read, min(MAX_FRAME_BYTES, MAX_MESSAGE_BYTES - total), align)
        total += len(part)
        arrays.append(_array(part))
    return header, arrays


def refuse_widening(arrays: list) -> None:
    """Refuse a reply whose arrays, stacked by numpy (``np.asarray`` of a list of them, as a reader of a
    list reply does), would cost far more than they carry: numpy widens every one to the widest dtype
    among them, so a thousand bool arrays and one complex256 (a red team's 25 MB reply) took the grader
    to 808 MiB. Stacked, a reply may take twice its size plus STACKED_SLACK_BYTES; one array is never
    widened."""
    if len(arrays) < 2:
        return
    carried = sum(a.nbytes for a in arrays)
    stacked = sum(a.size for a in arrays) * max(a.dtype.itemsize for a in arrays)
    if stacked > 2 * carried + STACKED_SLACK_BYTES:
        raise WireError(f"its {len(arrays)} arrays of {carried:,} bytes would take {stacked:,} bytes read "
                        "together (numpy widens each to the widest dtype among them)")


def write_frame(fd: int, header: dict, arrays: list) -> None:
    """Write one frame part by part (see :func:`frame_parts`) to a blocking ``fd``."""
    for part in frame_parts(header, arrays):
        _write_all(fd, part)


def _npy_parts(arr: np.ndarray):
    """(.npy header, body as a buffer, body size) of an array, the body not copied when contiguous."""
    if arr.dtype.hasobject:
        raise WireError(f"an array of Python objects ({arr.dtype}) cannot cross the wire")
    fortran = arr.flags.f_contiguous and not arr.flags.c_contiguous
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_2_0(buf, {"descr": np.lib.format.dtype_to_descr(arr.dtype),
                                                   "fortran_order": bool(fortran), "shape": arr.shape})
    except ValueError as exc:
        raise WireError(str(exc)) from None
    body = arr.T if fortran else arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    view = memoryview(body.reshape(-1).view(np.uint8)) if body.size else memoryview(b"")
    return buf.getvalue(), view, view.nbytes


def _write_all(fd: int, data) -> None:
    data = memoryview(data)
    while data:
        data = data[os.write(fd, data):]
