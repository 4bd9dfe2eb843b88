"""The child process: imports one candidate module and serves calls from the grader.

Run as ``python -s -P -B child.py IN_FD OUT_FD`` from a scratch directory. It only ever sends
values back (JSON and .npy bytes, see ``wire.py``); every verdict is made by the grader, and
every figure a verdict rests on (memory, time) is measured by the grader. Every frame sent
back carries the id of the request it answers.
Objects that cannot cross the wire (a cache instance, a bound method) stay here and travel
as handles. Objects the grader lends (``{"$host": ...}``, such as a KV source) become local
stand-ins whose methods ask the grader over the same pipes; the object lent last, lent again, is
the same stand-in (a caller's source called again: a cache keyed on its identity shows).
"""
import builtins
import collections
import gc
import importlib.util
import mmap
import os
import signal
import sys
import traceback
import types
import warnings
import weakref
import zlib

import numpy

# What the code of this file and of the modules it loads privately calls is bound now, before any
# candidate code runs: the candidate's module shares this interpreter, and a one-line
# ``numpy.flip = ...``, ``builtins.isinstance = ...`` or ``import wire; wire.encode = ...`` must not
# change what a probe sees or what a reply carries. (This raises the bar; it is not a wall: see
# "What a probe in the child can and cannot prove" in the README.)
__builtins__ = dict(vars(builtins))  # functions defined below look names up here, not in `builtins`
_NUMPY = types.SimpleNamespace(**vars(numpy))  # numpy's names as they were before the candidate's import
np = _NUMPY


def _private_import(name, globals=None, locals=None, fromlist=(), level=0):
    """``import`` in a privately loaded module: numpy is the snapshot, the rest as usual."""
    if name == "numpy" and level == 0:
        return _NUMPY
    return __builtins__["__import__"](name, globals, locals, fromlist, level)


def load_private(name: str, path: str) -> types.ModuleType:
    """The kit file ``path`` as a module of our own: not in ``sys.modules`` (an ``import`` by candidate
    code finds a copy of its own, never this one), with its own builtins and numpy as they were before
    the candidate's module was imported."""
    module = types.ModuleType(f"kvgrade-private-{name}")
    module.__dict__.update(__file__=path, __builtins__=dict(__builtins__, __import__=_private_import))
    with open(path, "rb") as f:
        exec(compile(f.read(), path, "exec"), module.__dict__)
    return module


wire = load_private("wire", os.path.join(os.path.dirname(os.path.abspath(__file__)), "wire.py"))

# Captured before candidate code runs, so a monkeypatched os does not cut the line.
_read, _write = os.read, os.write
_crc32, _ndarray, _generic, _refcount = zlib.crc32, np.ndarray, np.generic, sys.getrefcount
_collect, _logical_not, _may_share_memory = gc.collect, np.logical_not, np.may_share_memory
_as_ndarray, _list_clear = numpy.ndarray.view, list.clear  # methods of the types themselves: no subclass's
_finalize, _asarray = weakref.finalize, numpy.asarray
_LIMITS = {(k, n): (int(numpy.iinfo(f"{k}{n}").min), int(numpy.iinfo(f"{k}{n}").max))
           for k in "iu" for n in (1, 2, 4, 8)}  # a scribble's integer fill, by kind and size

HELD_RESULTS = 8  # arrays returned by earlier calls that later replies report on
HELD_BYTES = wire.HELD_BYTES  # their total size: in the child's footprint, so small and allowed for
KEPT_ARGUMENTS = 8  # arguments a call kept a reference to, that later replies report on
LENT = "kvgrade.lent"  # the module of the stand-ins for objects the grader lends (make_host_proxy)
DIGEST_DEPTH = 8  # nesting a digest follows (a kit object's attributes, a list of arrays)


class Host:
    """Talks to the grader: replies to requests, asks it for callbacks."""

    def __init__(self, in_fd, out_fd):
        self.in_fd, self.out_fd = in_fd, out_fd
        self.objects, self.next_id = {}, 1
        self.request_id = None  # the request being served: every frame we send carries it
        self.probes = Probes(())
        self.probe = None  # the probe report of the call being served
        self.lent = None  # the memory the grader lends as a caller's own buffers (grader/sandbox/shared.py)
        self.lent_arrays = {}  # (offset, dtype, shape) -> the one array over that memory: the same object each call
        self.drivers = {}  # kit drivers by name, loaded privately (load_private)
        self.stand_in = (None, None, None)  # (token, stand-in, its state) of the object lent last (make_host_proxy)

    def map_lent(self, shared):
        """Map the grader's shared memory ([descriptor, size] from the load request), then close the descriptor."""
        if shared:
            fd, size = shared
            self.lent = mmap.mmap(fd, size)
            os.close(fd)

    def send(self, header, arrays=()):
        wire.write_frame(self.out_fd, dict(header, id=self.request_id), list(arrays))

    def receive(self):
        return wire.read_frame(self.in_fd, _read, align=wire.LENT_ALIGN)  # where a lent array's data starts too

    def decode(self, tree, arrays):
        """A value of a frame, every array in it over a neutral base (:func:`_neutral`)."""
        return wire.decode(tree, arrays, self.resolve, leaf=_neutral)

    # objects that stay here travel as handles
    def export(self, value):
        handle = self.next_id
        self.next_id += 1
        self.objects[handle] = value
        label = getattr(value, "__qualname__", None) if callable(value) else None
        return {"$obj": handle, "type": str(label or type(value).__name__), "callable": callable(value)}

    def resolve(self, tagged, arrays):
        if "$obj" in tagged:
            return self.objects[tagged["$obj"]]
        if "$host" in tagged:
            return make_host_proxy(self, tagged, arrays)
        if "$shared" in tagged:  # a caller's own buffer: the grader may rewrite it after the call
            offset, dtype, shape, layout = tagged["$shared"]
            key = (offset, dtype, tuple(shape), layout)
            if key not in self.lent_arrays:  # passed again, it is the same array (a memo keyed on identity shows)
                self.lent_arrays[key] = _neutral(wire.over_memory(self.lent, offset, np.dtype(dtype), key[2], layout))
            return self.lent_arrays[key]
        raise wire.WireError(f"unknown reference {sorted(tagged)}")

    def encode_reply(self, value, **extra):
        """Send ``value`` as the reply; returns the arrays it carried."""
        arrays = []
        tree = wire.encode(value, arrays, self.export)
        self.send(dict(extra, ok=True, value=tree), arrays)
        return arrays

    def callback(self, host_id, name, args):
        arrays = []
        tree = wire.encode(list(args), arrays, self.export)
        self.send({"op": "callback", "host": host_id, "name": name, "args": tree}, arrays)
        header, arrays = self.receive()
        if not header.get("ok"):
            raise RuntimeError(header.get("error", "the grader refused the callback"))
        return self.decode(header["value"], arrays)


class _Memory:
    """The base of every array the child receives, sent or lent: one neutral type whatever owns the bytes
    (a message's buffer, or the memory the grader lends and may rewrite after the call), so an answer
    cannot pick out the lent ones by their base and copy only those (a red team did, by finding an mmap
    under them). Its owner is kept in ``_OWNERS`` for as long as it lives, not on it."""
    __slots__ = ("__array_interface__", "__weakref__")


_OWNERS = {}


def _neutral(arr):
    """The same memory as ``arr``, in the same layout, as an array whose base is a :class:`_Memory`."""
    if type(arr) is not _ndarray:
        return arr
    holder = _Memory()
    holder.__array_interface__ = arr.__array_interface__
    _OWNERS[id(holder)] = arr
    _finalize(holder, _OWNERS.pop, id(holder), None)
    return _asarray(holder)


def make_host_proxy(host, tagged, arrays):
    """A local stand-in for an object the grader lends, e.g. the KV source of a kernel. The object
    lent last, lent again (its token ``same``), is the same stand-in with its attributes read anew,
    as a caller's object called again is the same object; only that one is kept (its memory is one
    argument's)."""
    attrs = host.decode(tagged.get("attrs", {}), arrays)
    token, proxy, state = host.stand_in
    if token is None or token != tagged.get("same"):
        state = {}  # the handle of this request (handles are per request) and the length
        namespace = {"__module__": LENT}
        for name in tagged.get("methods", []):
            namespace[name] = (lambda n: lambda self, *a: host.callback(state["host"], n, a))(name)
        if "len" in tagged:
            namespace["__len__"] = lambda self: state["len"]
        proxy = type(str(tagged.get("type", "HostObject")), (), namespace)()
        host.stand_in = (tagged.get("same"), proxy, state)
    state.update(host=tagged["$host"], len=tagged.get("len"))
    for key, value in attrs.items():
        setattr(proxy, key, value)
    return proxy


def error_reply(exc):
    """The error as data, with where it happened: the innermost frame of the candidate's files (not the
    kit's runtime, nor Python's import machinery); for a SyntaxError, the line it names."""
    where = ""
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        where = f"{os.path.basename(exc.filename)}:{exc.lineno}"
    for frame in reversed(traceback.extract_tb(exc.__traceback__) if not where else ()):
        if "kvgrade-runtime" not in frame.filename and not frame.filename.startswith("<frozen"):
            where = f"{os.path.basename(frame.filename)}:{frame.lineno}"
            break
    return {
        "ok": False,
        "error": {
            "type": type(exc).__name__,
            "mro": [c.__name__ for c in type(exc).__mro__],
            "message": str(exc)[:2000],
            "where": where,
        },
    }


# -- ownership probes: what a call did to its arguments and to results it returned earlier ----------
# The grader judges; a reply whose probe is missing or malformed counts against the candidate.


def _bytes_of(arr):
    """The array's memory, uncopied when some reordering of its axes is contiguous (the layouts the
    grader sends: C, Fortran, reversed), so a probe of a large argument costs no memory."""
    flipped = arr[(slice(None, None, -1),) * arr.ndim]  # indexing, no Python-level numpy function
    for view in (arr, arr.T, flipped, flipped.T):
        if view.flags.c_contiguous:
            try:
                return memoryview(view).cast("B")
            except (TypeError, ValueError, BufferError):  # formats memoryview does not carry
                break
    return arr.tobytes()


def _feed(h, value, kit_modules, depth):
    """Hash ``value``'s contents: arrays by dtype, shape and bytes; containers item by item; an
    object of a kit helper (the model) or one the grader lends (a KV source: its positions are the
    caller's) by its public attributes; any other object (the cache the exercise names) by its type
    only: its state may change."""
    if depth > DIGEST_DEPTH:
        h.update(b"<deep>")
    elif isinstance(value, (_ndarray, _generic)):
        arr = value if isinstance(value, _ndarray) else np.asarray(value)
        h.update(f"nd{arr.dtype.str}{arr.shape}".encode())
        if not arr.dtype.hasobject:
            h.update(_bytes_of(arr))
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}{len(value)}[".encode())
        for item in value:
            _feed(h, item, kit_modules, depth + 1)
        h.update(b"]")
    elif isinstance(value, dict):
        h.update(f"dict{len(value)}{{".encode())
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key], kit_modules, depth + 1)
    elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        h.update(f"{type(value).__name__}:{value!r}".encode())
    elif (type(value).__module__ in kit_modules or type(value).__module__ == LENT) and hasattr(value, "__dict__"):
        public = {k: v for k, v in vars(value).items() if not k.startswith("_")}  # _ names: the kit's tallies
        _feed(h, public, kit_modules, depth + 1)
    else:
        h.update(f"<{type(value).__qualname__}>".encode())


class _Crc:
    """A running CRC-32: fast enough for every argument of every call (a probe for honest
    mistakes; the child's own process could forge any digest anyway)."""

    def __init__(self):
        self.value, self.size = 0, 0

    def update(self, data):
        self.value = _crc32(data, self.value)
        self.size += len(data)


def digest(value, kit_modules=frozenset()) -> str:
    h = _Crc()
    _feed(h, value, kit_modules, 0)
    return f"{h.value:08x}-{h.size}"


def _labels(args, kwargs):
    return [(str(i), a) for i, a in enumerate(args)] + [(k, v) for k, v in kwargs.items()]


class Probes:
    """Arguments before and after each candidate call, the arrays earlier calls returned, and the
    arguments a call kept a reference to (an alias a later call may change)."""

    def __init__(self, kit_modules):
        self.kit_modules = frozenset(kit_modules)
        self.held = collections.deque()  # (request id, index, array, digest)
        self.kept = collections.deque()  # (request id, label, argument, digest)

    def before(self, args, kwargs):
        """This call's arguments as they come in. Kept arguments are digested afresh: one lent by the grader
        may have been rewritten since, as a caller may; only a change made during a call is the call's."""
        self.kept = collections.deque((*entry[:3], digest(entry[2], self.kit_modules)) for entry in self.prune())
        return [(label, digest(value, self.kit_modules), _holders(value)) for label, value in _labels(args, kwargs)]

    def report(self, before, args, kwargs, request_id=None) -> dict:
        """Which arguments changed during the call, which held results and which arguments kept by
        earlier calls changed since, and which of this call's arguments the candidate kept."""
        labelled = _labels(args, kwargs)
        after = {label: digest(value, self.kit_modules) for label, value in labelled}
        changed = [label for label, d, _ in before if after.get(label) != d]
        moved, self.held = _changed_since(self.held, self.kit_modules)
        aliased, self.kept = _changed_since(self.prune(), self.kit_modules)
        for (label, value), (_, _, counts) in zip(labelled, before):
            kept = any(now > then for now, then in zip(_holders(value), counts))
            if _mutable(value) and kept and _digested(after[label]) <= HELD_BYTES // KEPT_ARGUMENTS:
                self.kept.append((request_id, label, value, after[label]))
        while len(self.kept) > KEPT_ARGUMENTS:
            self.kept.popleft()
        return {"changed": changed, "moved": moved, "aliased": aliased}

    def handed_back(self, value) -> list:
        """[request id, index] of each held result that was handed out writable (and scribbled over, as a
        caller may write) and that this reply hands back, or a view of: a memo that hands out its own array
        answers with whatever the last caller wrote there."""
        arrays = [a for a in (value if isinstance(value, (tuple, list)) else (value,)) if isinstance(a, _ndarray)]
        return [[request, index] for request, index, arr, _ in self.held
                if arr.flags.writeable and any(a is arr or _may_share_memory(a, arr) for a in arrays)]

    def prune(self) -> collections.deque:
        """Forget kept arguments the candidate no longer holds: ours would be their last reference."""
        self.kept = collections.deque(e for e in self.kept if max(_holders(e[2])) > _ALONE)
        return self.kept

    def hand_over(self, request_id, arrays, value=None):
        """After the reply is sent: scribble over each writable array it carried (a memo handed
        out writable then gives a later call a visibly wrong answer), and hold it. A list it carried
        (split_ranges' cover) is the caller's too: it is emptied, so a memo that handed it out
        answers the next call with nothing. An argument handed back as a result is the caller's
        to change from now on: it is no longer watched."""
        for result in _lists(value):
            self.kept = collections.deque(e for e in self.kept if e[2] is not result)
            _list_clear(result)
        self.kept = collections.deque(e for e in self.kept if not any(
            e[2] is arr or (isinstance(e[2], _ndarray) and isinstance(arr, _ndarray) and _may_share_memory(e[2], arr))
            for arr in arrays))
        for index, arr in enumerate(arrays):
            if not isinstance(arr, _ndarray) or arr.dtype.hasobject or arr.ndim == 0:
                continue
            if arr.flags.writeable:
                _scribble(arr)
            if arr.nbytes <= HELD_BYTES // HELD_RESULTS:
                self.held.append((request_id, index, arr, digest(arr)))
        while len(self.held) > HELD_RESULTS:
            self.held.popleft()


def _lists(value) -> list:
    """The lists a reply is made of: itself, or the members of a tuple it is (subclasses too, read with the
    base types' own methods)."""
    members = _items(value) if issubclass(type(value), tuple) else (value,)
    return [member for member in members if issubclass(type(member), list)]


def _items(value) -> list:
    """A list's or tuple's members, read with the base type's own methods: a subclass's ``__iter__`` or
    ``__getitem__`` may answer each reader differently."""
    base = list if issubclass(type(value), list) else tuple
    return [base.__getitem__(value, i) for i in range(base.__len__(value))]


def plain(value, depth=0):
    """A reply as plain values, before any probe or the wire reads it. An answer's ndarray, list, tuple or
    dict subclass could override the methods that read it (``copy``, ``__setitem__``, ``__iter__``, a
    ``flags`` property), and so tell each reader something else: the probes and the wire then see one
    thing, and each array becomes a plain ndarray over the answer's own memory. ``type()``, never
    ``isinstance``, decides: a ``__class__`` property can claim any class."""
    kind = type(value)
    if kind is _ndarray or depth > wire.MAX_DEPTH:
        return value
    if issubclass(kind, _ndarray):
        return _as_ndarray(value, _ndarray)
    if issubclass(kind, (list, tuple)):
        items = [plain(v, depth + 1) for v in _items(value)]
        return items if issubclass(kind, list) else tuple(items)
    if issubclass(kind, dict):
        return {k: plain(v, depth + 1) for k, v in dict.items(value)}
    return value


# references _holders counts to an array no one else holds: its one holder (our entry, or the array
# whose memory comes from it), _holders' own variable, getrefcount's argument
_ALONE = 3


def _holders(value) -> list:
    """References to ``value`` and to each array its memory comes from: a view the candidate keeps of
    an argument (``k[:n]``, ``k.T``) refers to the array owning the memory, not to the argument."""
    counts = [_refcount(value)]
    base = value.base if isinstance(value, _ndarray) else None
    while isinstance(base, _ndarray):
        counts.append(_refcount(base))
        base = base.base
    return counts


def _mutable(value) -> bool:
    return isinstance(value, (list, dict)) or (isinstance(value, _ndarray) and not value.dtype.hasobject)


def _digested(d: str) -> int:
    """The bytes a digest covered."""
    return int(d.rpartition("-")[2])


def _changed_since(entries, kit_modules):
    """([request id, key] of the entries whose value's digest changed, the entries unchanged)."""
    changed, same = [], collections.deque()
    for entry in entries:
        if digest(entry[2], kit_modules) == entry[3]:
            same.append(entry)
        else:
            changed.append([entry[0], entry[1]])
    return changed, same


def _scribble(arr):
    kind = arr.dtype.kind
    try:
        if kind == "b":
            _logical_not(arr, out=arr)
        elif kind in "iu":
            low, high = _LIMITS[kind, arr.dtype.itemsize]
            arr[...] = high if kind == "u" else low
        elif kind in "fc":
            arr[...] = np.nan
    except (TypeError, ValueError):  # a view numpy will not write through
        pass


def _quietly(probe, *args):
    """A probe's answer, or None when it fails: the grader then counts the report as missing,
    and the call's own outcome is kept."""
    try:
        return probe(*args)
    except Exception:  # noqa: BLE001  (whatever candidate objects do when read)
        return None


def run_call(host, header, arrays, module):
    target = module if header.get("target") is None else host.objects[header["target"]]
    op = header["op"]
    if op == "import":  # a kit helper: a driver loaded before the candidate's module, or one such as gpt2
        return host.drivers.get(header["name"]) or importlib.import_module(header["name"])
    if op == "collect":  # before each check that may measure: what nothing holds is freed now
        _collect()
        host.probes.prune()
        return None
    if op == "getattr":
        return getattr(target, header["name"])
    if op == "len":
        return len(target)
    if op == "call":
        fn = target if header.get("name") is None else getattr(target, header["name"])
        args = host.decode(header.get("args", []), arrays)
        kwargs = host.decode(header.get("kwargs", {}), arrays)
        before = _quietly(host.probes.before, args, kwargs) if header.get("probe") else None
        if before is None:  # a kit helper's call, or arguments the probe cannot read: no report
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            host.probe = _quietly(host.probes.report, before, args, kwargs, host.request_id)
    raise wire.WireError(f"unknown operation {op!r}")


def serve(host, module):
    while True:
        header = arrays = value = reply = failure = sent = None  # nothing of the last request outlives it
        header, arrays = host.receive()
        if header.get("op") == "exit":
            return
        host.request_id = header.get("id")
        for handle in header.get("release", []):  # objects the grader no longer holds
            host.objects.pop(handle, None)
        # numpy's defaults: exp of a very negative score underflows in any correct softmax
        np.seterr(all="warn", under="ignore")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value, failure = run_call(host, header, arrays, module), None
                reply = plain(value)
            except BaseException as exc:  # noqa: BLE001  (SystemExit too: report, keep serving)
                value, failure = None, exc
        said = {"warnings": [f"{w.category.__name__}: {w.message}" for w in caught][:20]}
        if host.probe is not None:
            said["probe"], host.probe = dict(host.probe, again=_quietly(host.probes.handed_back, reply)), None
        if failure is not None:
            host.send(dict(error_reply(failure), **said))
            continue
        try:
            sent = host.encode_reply(reply, **said)
        except wire.WireError as exc:
            host.send(dict(error_reply(exc), **said, bad_value=True))
            continue
        if "probe" in said:
            host.probes.hand_over(host.request_id, sent, value)


def main():
    in_fd, out_fd = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the output cap: writes fail, we live
    host = Host(in_fd, out_fd)
    header, _ = host.receive()  # {"op": "load", "id": ..., "path": ..., "name": ..., "sys_path": [...]}
    host.request_id = header.get("id")
    host.map_lent(header.get("shared"))
    sys.path[:0] = header["sys_path"]
    kit = header["sys_path"][0]
    host.probes = Probes(name[:-3] for name in os.listdir(kit) if name.endswith(".py"))
    # a kit driver (``*_driver.py``) calls the candidate's code for the checks and reports what it saw: ours
    # is loaded now, privately; gpt2 and the like are imported as usual, the candidate's objects being theirs
    host.drivers = {name[:-3]: load_private(name[:-3], os.path.join(kit, name))
                    for name in sorted(os.listdir(kit)) if name.endswith("_driver.py")}
    sys.modules.pop("__main__", None)  # this file's names are not the candidate's to import
    try:
        spec = importlib.util.spec_from_file_location(header["name"], header["path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[header["name"]] = module
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001
        host.send(error_reply(exc))
        return
    host.send({"ok": True, "value": sorted(n for n in vars(module) if not n.startswith("_"))})
    serve(host, module)


if __name__ == "__main__":
    main()
