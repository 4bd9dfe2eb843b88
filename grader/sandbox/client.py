"""The grader's side of the sandbox: a worker per candidate module, and proxies for its values.

Hidden checks call ``candidate.some_function(args)`` as if the module were local; the call
travels to the child, and what comes back is plain data (numpy arrays, numbers, strings,
tuples, lists) or a handle to an object that stays in the child. Faults in candidate code
become exceptions of the ``CandidateFault`` family, each with one line fit for a report.
"""
from __future__ import annotations

import contextlib
import os
import select
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import wire
from .launch import Limits, Scratch, describe_exit, exit_status, kill, spawn


class CandidateFault(Exception):
    """Something in candidate code went wrong; ``str()`` is the one line a report shows."""


class CandidateRaised(CandidateFault):
    def __init__(self, call: str, error: dict):
        self.type_name = error.get("type", "Exception")
        self.mro = error.get("mro", [])
        self.message = error.get("message", "")
        where = f" at {error['where']}" if error.get("where") else ""
        said = f": {self.message}" if self.message else ""
        super().__init__(f"{call} raised {self.type_name}{said}{where}")

    def is_a(self, name: str) -> bool:
        return name in self.mro


class CandidateTimeout(CandidateFault):
    pass


class CandidateCrashed(CandidateFault):
    pass


class CandidateUnavailable(CandidateFault):
    """The candidate code faulted too often (or failed to load); the call was not made."""


class CandidateLoadError(CandidateFault):
    pass


class BadValue(CandidateFault):
    """The child sent something the wire does not carry."""


def describe(value) -> str:
    """A short rendering of an argument for messages: arrays by dtype and shape."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype}[{', '.join(map(str, value.shape))}]"
    if isinstance(value, (list, tuple)):
        if len(value) > 6:
            return f"[{len(value)} items]"
        inner = ", ".join(describe(v) for v in value)  # never repr an array: slow and long
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, Lent):
        return f"<{value.wire_type}>"
    if isinstance(value, RemoteObject):
        return f"<{value.type_name}>"
    return repr(value)


def call_text(name: str, args=(), kwargs=None) -> str:
    parts = [describe(a) for a in args] + [f"{k}={describe(v)}" for k, v in (kwargs or {}).items()]
    return f"{name}({', '.join(parts)})"


class Lent:
    """Base for grader objects handed to candidate code by reference (e.g. a KV source).

    The child sees a stand-in with ``wire_attrs()`` as attributes and ``wire_methods`` that
    call back here, so the grader observes every use.
    """

    wire_type = "HostObject"
    wire_methods: tuple = ()

    def wire_attrs(self) -> dict:
        return {}

    def wire_len(self):
        return None


@dataclass
class CallStats:
    seconds: float = 0.0
    peak_bytes: int | None = None
    warnings: list = field(default_factory=list)


@dataclass
class ModuleToLoad:
    name: str  # the module name the candidate's code expects, e.g. "decode_mask"
    candidate_files: list  # copied into the child's candidate/ folder
    helper_files: list  # kit helpers; copied into kit/, which comes first on sys.path
    refused: str | None = None  # why the candidate's files were not read: the exercise's load error


class Worker:
    """One child process holding one imported candidate module."""

    def __init__(self, module: ModuleToLoad, limits: Limits):
        self.module, self.limits = module, limits
        self.scratch = Scratch()
        self.proc = None
        self.loading: dict | None = None
        self.hosts: dict[int, Lent] = {}

    def launch(self):
        """Start the child and send it the module to import; :meth:`finish_load` waits for it."""
        child = self.scratch.add_runtime()
        kit = self.scratch.add_files("kit", self.module.helper_files)
        cand = self.scratch.add_files("candidate", self.module.candidate_files)
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        try:
            self.proc = spawn([str(child), str(to_child_r), str(from_child_w)], self.scratch,
                              self.limits, pass_fds=(to_child_r, from_child_w))
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        os.set_blocking(self.to_child, False)  # writes wait with a deadline, see _write
        self.loading = {"op": "load", "name": self.module.name,
                        "path": str(cand / f"{self.module.name}.py"), "sys_path": [str(kit), str(cand)]}
        try:  # the child imports while other children start; finish_load reads its answer
            self._write(wire.pack(self.loading, []), time.monotonic() + self.limits.load_seconds)
        except (_Deadline, OSError):
            pass  # it died at once: finish_load reports how

    def finish_load(self):
        what = f"importing {self.module.name}"
        header, _ = self._exchange(None, [], self.limits.load_seconds, what)
        if not header.get("ok"):
            raise CandidateLoadError(str(CandidateRaised(f"{what}.py", _error_of(header))))

    def start(self):
        self.launch()
        self.finish_load()

    @property
    def isolation(self) -> str:
        return getattr(self.proc, "kvgrade_level", "process")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self._write(wire.pack({"op": "exit"}, []), time.monotonic() + 0.5)
                    self.proc.wait(timeout=1)
                except Exception:  # noqa: BLE001  any trouble: it is killed below
                    pass
            kill(self.proc)
            for fd in (self.to_child, self.from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.proc = None
        self.scratch.remove()

    # -- one request, with the callbacks it triggers ------------------------------------
    def _export(self, value):
        if isinstance(value, Lent):
            handle = len(self.hosts) + 1
            self.hosts[handle] = value
            arrays: list = []
            attrs = wire.encode(value.wire_attrs(), arrays)
            return {"$host": handle, "type": value.wire_type, "methods": list(value.wire_methods),
                    "attrs": attrs, "len": value.wire_len(), "_arrays": arrays}
        if isinstance(value, RemoteObject):
            return {"$obj": value.handle}
        return None

    def encode_args(self, tree_value):
        arrays: list = []

        def export(v):
            tagged = self._export(v)
            if tagged and "_arrays" in tagged:
                # host attributes share the frame's array list
                sub = tagged.pop("_arrays")
                offset = len(arrays)
                arrays.extend(sub)
                tagged["attrs"] = _shift(tagged["attrs"], offset)
            return tagged

        return wire.encode(tree_value, arrays, export), arrays

    def _exchange(self, header, arrays, timeout, what):
        """Send a request (unless ``header`` is None) and wait for its reply, serving callbacks."""
        deadline = time.monotonic() + timeout

        def read(fd, n):
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Deadline
                if select.select([fd], [], [], min(remaining, 0.25))[0]:
                    return os.read(fd, n)
                if self.proc.poll() is not None:  # died, though a process it forked holds the pipe
                    raise EOFError("the candidate process exited")

        message = wire.pack(header, arrays) if header is not None else b""  # None: already sent
        try:
            self._write(message, deadline)
            while True:
                reply, reply_arrays = wire.read_frame(self.from_child, read)
                if reply.get("op") != "callback":
                    return reply, reply_arrays
                self._serve_callback(reply, reply_arrays, deadline)
        except _Deadline:
            kill(self.proc)
            raise CandidateTimeout(f"{what} did not finish within {timeout:g} s; "
                                   "the candidate process was stopped") from None
        except (EOFError, BrokenPipeError, OSError):
            if self.proc is not None and self.proc.poll() is None:
                try:
                    self.proc.wait(timeout=2)
                except Exception:  # noqa: BLE001
                    pass
            code = exit_status(self.proc)
            kill(self.proc)
            tail = self.scratch.output_tail(160).splitlines()
            last = f"; its last output: {tail[-1][:160]!r}" if tail else ""
            raise CandidateCrashed(f"the candidate process died during {what}: "
                                   f"{describe_exit(code)}{last}") from None
        except wire.WireError as exc:
            kill(self.proc)
            raise BadValue(f"{what} sent back data the grader cannot read ({exc})") from None

    def _write(self, data: bytes, deadline: float):
        """Write a whole message, but never wait past ``deadline`` for a child that stops reading."""
        view = memoryview(data)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([], [self.to_child], [], remaining)[1]:
                raise _Deadline
            try:
                view = view[os.write(self.to_child, view[:1 << 16]):]
            except BlockingIOError:
                continue

    def _serve_callback(self, request, arrays, deadline):
        host = self.hosts.get(request.get("host")) if isinstance(request.get("host"), int) else None
        name = request.get("name")
        try:
            if host is None or not isinstance(name, str) or name not in host.wire_methods:
                raise ValueError(f"no such method {str(name)[:80]!r}")
            args = wire.decode(request.get("args", []), arrays)
            if not isinstance(args, list):
                raise ValueError("callback arguments must be a list")
            value = getattr(host, name)(*args)
            out_arrays: list = []
            reply = wire.pack({"ok": True, "value": wire.encode(value, out_arrays)}, out_arrays)
        except Exception as exc:  # noqa: BLE001  the candidate asked for something invalid
            reply = wire.pack({"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}, [])
        self._write(reply, deadline)

    def request(self, header, arrays, what) -> tuple[object, CallStats, dict]:
        reply, reply_arrays = self._exchange(header, arrays, self.limits.call_seconds, what)
        return reply, reply_arrays, _stats_of(reply)


def _number(value, kind, default):
    return value if type(value) in kind else default


def _stats_of(reply: dict) -> CallStats:
    """What the child says about a call; it is candidate-controlled, so only well-typed fields count."""
    warnings = reply.get("warnings")
    warnings = [w[:500] for w in warnings[:20] if isinstance(w, str)] if isinstance(warnings, list) else []
    return CallStats(float(_number(reply.get("seconds"), (int, float), 0.0)),
                     _number(reply.get("peak_bytes"), (int,), None), warnings)


def _error_of(reply: dict) -> dict:
    error = reply.get("error")
    if not isinstance(error, dict):
        return {"type": "Exception", "message": str(error)[:500] if error else ""}
    mro = error.get("mro")
    return {"type": str(error.get("type", "Exception"))[:100],
            "mro": [str(m) for m in mro[:50]] if isinstance(mro, list) else [],
            "message": str(error.get("message", ""))[:2000],
            "where": str(error.get("where", ""))[:200]}


class _Deadline(Exception):
    pass


def _shift(tree, offset):
    if isinstance(tree, list):
        return [_shift(v, offset) for v in tree]
    if isinstance(tree, dict):
        if "$nd" in tree:
            return dict(tree, **{"$nd": tree["$nd"] + offset})
        return {k: _shift(v, offset) for k, v in tree.items()}
    return tree


class Sandbox:
    """The candidate's module as seen by hidden checks, restarted after a fatal fault.

    ``sandbox.module.f(x)`` calls ``f`` in the child. After ``limits.max_faults`` timeouts or
    crashes, further calls fail at once with ``CandidateUnavailable``, so one hanging
    function cannot eat the whole grading run.
    """

    def __init__(self, module: ModuleToLoad, limits: Limits | None = None):
        self.spec, self.limits = module, limits or Limits()
        self.worker: Worker | None = None
        self.generation = 0
        self.faults: list[str] = []
        self.load_error: str | None = module.refused
        self.last_call = CallStats()
        self.calls_ok = 0
        self.calls_not_implemented = 0
        self.spent = 0.0  # seconds spent waiting on candidate code: loads and calls
        self._started_at = 0.0
        self.module = RemoteObject(self, None, module.name, False, 0)

    def launch(self) -> "Sandbox":
        """Start the child and let it import the module, without waiting (see ``start``).

        Launch every exercise's child from the same long-lived thread that later uses it:
        a sandboxed child dies with the thread that started it (``--die-with-parent``).
        """
        if self.worker is not None or self.load_error:
            return self
        self._check_budget()
        self.worker = Worker(self.spec, self.limits)
        self.generation += 1
        self._started_at = time.monotonic()
        try:
            self.worker.launch()
        except OSError as exc:  # the machine could not start a process
            self._discard_worker()
            raise CandidateUnavailable(f"the candidate process could not start: {exc}") from None
        return self

    def start(self) -> "Sandbox":
        """Start the child and import the module; a failed import is kept in ``load_error``."""
        if self.worker is not None and self.worker.alive() and self.worker.loading is None:
            return self
        if self.load_error:
            raise CandidateUnavailable(self.load_error)
        if self.worker is not None and (not self.worker.alive() or self.worker.loading is None):
            self._discard_worker()
        self.launch()
        try:
            self.worker.finish_load()
            self.worker.loading = None
        except CandidateFault as exc:
            self.load_error = str(exc)
            self._discard_worker()
            raise CandidateLoadError(self.load_error) from None
        finally:
            self.spent += time.monotonic() - self._started_at
        return self

    @property
    def isolation(self) -> str:
        """The isolation level the child runs at (``bwrap``, ``uid`` or ``process``)."""
        from .launch import isolation_level
        return self.worker.isolation if self.worker else isolation_level(self.limits)

    def over_budget(self) -> str:
        return (f"not run: the candidate's code already used {self.spent:.0f} s, over this "
                f"exercise's budget of {self.limits.exercise_seconds:g} s")

    @contextlib.contextmanager
    def budgeted(self, longest: float):
        """Run other candidate code (its own tests) on this exercise's time budget: yields the
        timeout to give it (at most ``longest``, at least 5 s), or None when nothing is left."""
        left = self.limits.exercise_seconds - self.spent
        began = time.monotonic()
        try:
            yield None if left <= 0 else min(longest, max(left, 5.0))
        finally:
            self.spent += time.monotonic() - began

    def _check_budget(self):
        if len(self.faults) >= self.limits.max_faults:
            raise CandidateUnavailable(
                f"not run: the candidate's code already failed {len(self.faults)} times "
                f"(last: {self.faults[-1]})")
        if self.spent > self.limits.exercise_seconds:
            raise CandidateUnavailable(self.over_budget())

    def close(self):
        self._discard_worker()

    def _discard_worker(self):
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

    def _request(self, obj: "RemoteObject", header: dict, what: str, args=(), kwargs=None,
                 measure_memory=False):
        self._check_budget()
        self.start()
        if obj.generation not in (0, self.generation):
            raise CandidateUnavailable(f"{what}: this {obj.type_name} was lost when the "
                                       "candidate process restarted after an earlier fault")
        worker = self.worker
        tree, arrays = worker.encode_args({"args": list(args), "kwargs": dict(kwargs or {})})
        header = dict(header, target=obj.handle, args=tree["args"], kwargs=tree["kwargs"],
                      measure_memory=measure_memory)
        began = time.monotonic()
        try:
            reply, reply_arrays, self.last_call = worker.request(header, arrays, what)
        except (CandidateTimeout, CandidateCrashed, BadValue) as exc:
            self.faults.append(str(exc))
            self._discard_worker()
            raise
        finally:
            worker.hosts.clear()
            self.spent += time.monotonic() - began
        if reply.get("ok") is not True:  # the reply is the child's word: only well-formed fields count
            error = _error_of(reply)
            if reply.get("bad_value"):
                raise BadValue(f"{what} returned a value the grader cannot read: {error['message']}")
            if error["type"] == "NotImplementedError":
                self.calls_not_implemented += 1
            raise CandidateRaised(what, error)
        kit = obj.kit or header["op"] == "import"  # the kit's helpers are not the candidate's code
        try:
            value = wire.decode(reply.get("value"), reply_arrays,
                                lambda tagged, arrays: self._resolve(tagged, arrays, kit))
        except (wire.WireError, BadValue) as exc:
            self.faults.append(str(exc))
            self._discard_worker()
            raise BadValue(f"{what} sent back data the grader cannot read ({exc})") from None
        self.calls_ok += header["op"] == "call" and not kit
        return value

    def helper(self, name: str) -> "RemoteObject":
        """A kit helper module imported in the child (e.g. ``gpt2``), to build its objects there."""
        return self._request(self.module, {"op": "import", "name": name}, f"import {name}")

    def _resolve(self, tagged, arrays, kit=False):
        if "$obj" in tagged and type(tagged["$obj"]) is int:
            return RemoteObject(self, tagged["$obj"], str(tagged.get("type", "object"))[:100],
                                bool(tagged.get("callable")), self.generation, kit)
        raise BadValue(f"the candidate sent an unknown reference {sorted(tagged)[:5]}")


class RemoteObject:
    """A value that lives in the child: the module itself, an instance, a function."""

    def __init__(self, sandbox: Sandbox, handle, type_name: str, is_callable: bool, generation: int,
                 kit: bool = False):
        self._sandbox, self.handle, self.type_name = sandbox, handle, type_name
        self.is_callable, self.generation = is_callable, generation
        self.kit = kit  # made by a kit helper (ex.helper): its calls do not count as attempts

    def _label(self, name=None):
        base = "" if self.handle is None else f"{self.type_name}."
        return f"{base}{name}" if name else self.type_name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._sandbox._request(self, {"op": "getattr", "name": name}, self._label(name))

    def __call__(self, *args, measure_memory=False, **kwargs):
        what = call_text(self.type_name, args, kwargs)
        return self._sandbox._request(self, {"op": "call", "name": None}, what, args, kwargs,
                                      measure_memory)

    def __len__(self):
        value = self._sandbox._request(self, {"op": "len"}, f"len({self.type_name})")
        return value

    def call(self, name, *args, measure_memory=False, **kwargs):
        """Call method ``name`` in one round trip (what ``obj.name(...)`` does in two)."""
        what = call_text(self._label(name), args, kwargs)
        return self._sandbox._request(self, {"op": "call", "name": name}, what, args, kwargs,
                                      measure_memory)

    def __repr__(self):
        return f"<candidate {self.type_name}>"
