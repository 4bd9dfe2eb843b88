"""The grader's side of the black box the candidate's own tests call (see ``blackbox.py``).

The tests' process and the process holding the implementation under test never meet: each
request from the tests travels here, is checked, and only then goes on to the implementation's
child (the ordinary ``child.py`` worker). What the tests may ask for is narrow: call or look up
a public name of the exercise, or call, look up or take ``len`` of an object a reply handed
them, by a name without a leading underscore. So no request reaches a module's ``__file__``,
its loader, a marker such as ``EXPECTED_DIAGNOSIS`` or a helper it imported. Replies carry
values and error types and messages, never where an error was raised (line numbers differ
between versions).
"""
from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path


from . import wire
from .errors import CandidateFault
from .launch import Limits
from .worker import CallClock, Deadline, ModuleToLoad, Worker, reader, write_all

MAX_NAME = 100  # characters in an attribute name the tests ask for


class RelayTimeout(Exception):
    """The tests did not finish before the deadline."""


def public_names(source: Path) -> list[str]:
    """A module's public API: its top-level functions and classes not starting with _."""
    tree = ast.parse(source.read_text())
    return [node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]


def public_constants(source: Path) -> dict:
    """A module's public names bound to literals at the top level (``SKIP, PARTIAL, FULL = 0, 1, 2``): values
    the contract fixes, so a proxy holds them itself rather than asking the implementation."""
    found = {}
    for node in ast.parse(source.read_text()).body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        try:
            value = ast.literal_eval(node.value)
        except ValueError:
            continue
        target = node.targets[0]
        names = [target] if isinstance(target, ast.Name) else list(getattr(target, "elts", []))
        values = [value] if isinstance(target, ast.Name) else list(value) if isinstance(value, tuple) else []
        if len(names) == len(values) and all(isinstance(n, ast.Name) for n in names):
            found.update({n.id: v for n, v in zip(names, values) if not n.id.startswith("_")})
    return found


def proxy_source(module_name: str, runtime: Path, to_grader: int, from_grader: int, names,
                 constants: dict | None = None) -> str:
    """A module the tests import in place of ``module_name``: each public name forwards; ``constants``
    (:func:`public_constants`) are its own."""
    return (f'"""{module_name}, served by the grader: each public name forwards its calls to the '
            'implementation under test."""\n'
            "import sys as _sys\n"
            f"_sys.path.insert(0, {str(runtime)!r})\n"
            "import blackbox as _blackbox\n"
            "del _sys.path[0]\n"
            f"_blackbox.install(globals(), {to_grader}, {from_grader}, {module_name!r}, {list(names)!r})\n"
            + "".join(f"{name} = {value!r}\n" for name, value in (constants or {}).items()))


@dataclass(frozen=True)
class _Handle:
    """An object living in the implementation's process, as a reply named it."""

    id: int
    type: str
    callable: bool


class Implementation:
    """The implementation under test in a worker of its own, answering checked requests.

    ``api`` maps each module the tests may call (the exercise's, and its kit helpers such as
    ``gpt2``) to its public names. ``read_only``: every array a reply hands the tests arrives as
    a read-only view (section 1: a read-only result is fine), so the same implementation is
    another correct answer.
    """

    def __init__(self, module_name: str, implementation: Path, helper_files, api: dict, limits: Limits,
                 seed: int = 0, read_only: bool = False):
        spec = ModuleToLoad(module_name, [(f"{module_name}.py", implementation)], list(helper_files), seed=seed)
        self.worker = Worker(spec, limits)
        self.module_name, self.api, self.read_only = module_name, api, read_only
        self.helpers: dict[str, int] = {}  # helper module -> its handle in the worker, never shown
        self.handles: set[int] = set()  # objects a reply handed to the tests
        self.stopped = ""  # why the implementation no longer answers

    def launch(self):
        """Start the worker importing the implementation; :meth:`finish_load` waits for it.

        At the "uid" level its folder (the implementation's source among its files) becomes
        its own uid's: the tests' process runs under another uid and must not read it there."""
        self.worker.launch()
        child = self.worker.child
        if child is not None and child.uid is not None:
            os.chown(self.worker.scratch.root, -1, child.uid)
            os.chmod(self.worker.scratch.root, 0o750)

    def finish_load(self):
        self.worker.finish_load()

    def stop(self):
        self.worker.stop()

    def answer(self, header, arrays) -> tuple[dict, list]:
        """The reply to one request from the tests: checked, forwarded, and cleaned."""
        if self.stopped:
            return _error("RuntimeError", self.stopped), []
        try:
            request, request_arrays = self._checked(header, arrays)
            reply, reply_arrays = self._forward(request, request_arrays)
        except (wire.WireError, ValueError) as exc:
            return _error("ValueError", f"the grader refused this request: {exc}"), []
        except CandidateFault:
            self.stopped = "the implementation under test stopped answering (a call timed out or crashed it)"
            return _error("RuntimeError", self.stopped), []
        if reply.get("ok") is not True:
            return _error_reply(reply.get("error")), []
        try:
            value = wire.decode(reply.get("value"), reply_arrays, self._receive)
            value = wire.read_only(value) if self.read_only else value
            out: list = []
            return {"ok": True, "value": wire.encode(value, out, _send)}, out
        except wire.WireError as exc:
            return _error("ValueError", f"the value cannot cross the wire: {exc}"), []

    def _forward(self, request: dict, arrays: list) -> tuple[dict, list]:
        module = request.pop("module", self.module_name)
        if request["target"] is None and module != self.module_name:
            request["target"] = self._helper(module)
        reply, reply_arrays, _ = self.worker.request(request, arrays, "a call from your tests")
        return reply, reply_arrays

    def _helper(self, module: str) -> int:
        """The handle of a kit helper module in the worker, imported there on first use."""
        if module not in self.helpers:
            reply, _, _ = self.worker.request({"op": "import", "name": module, "target": None},
                                              [], f"import {module}")
            handle = reply.get("value", {}).get("$obj") if isinstance(reply.get("value"), dict) else None
            if type(handle) is not int:
                raise CandidateFault(f"the kit helper {module} did not import")
            self.helpers[module] = handle
        return self.helpers[module]

    def _checked(self, header, arrays) -> tuple[dict, list]:
        """The request rebuilt from what it may hold; ValueError for anything else."""
        if not isinstance(header, dict):
            raise ValueError("not a request")
        op, target, name = header.get("op"), header.get("target"), header.get("name")
        module = header.get("module", self.module_name)
        if op not in ("call", "getattr", "len"):
            raise ValueError(f"unknown operation {str(op)[:40]!r}")
        if name is not None and (not isinstance(name, str) or name.startswith("_") or len(name) > MAX_NAME):
            raise ValueError(f"no public name {str(name)[:MAX_NAME]!r}")
        if target is None:
            if op == "len" or not isinstance(module, str) or name not in self.api.get(module, ()):
                raise ValueError(f"{str(module)[:MAX_NAME]} has no public name {str(name)[:MAX_NAME]!r}")
        elif type(target) is not int or target not in self.handles:
            raise ValueError("unknown object")
        elif op == "len" and name is not None:
            raise ValueError("len takes no name")
        if op == "getattr" and name is None:
            raise ValueError("getattr needs a name")
        args = wire.decode(header.get("args", []), arrays, self._argument)
        kwargs = wire.decode(header.get("kwargs", {}), arrays, self._argument)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("arguments must be a list and a dict")
        out: list = []
        tree = wire.encode({"args": args, "kwargs": kwargs}, out, _send)
        return {"op": op, "target": target, "name": name, "module": module, **tree}, out

    def _argument(self, tagged, arrays):
        handle = tagged.get("$obj")
        if type(handle) is not int or handle not in self.handles or len(tagged) != 1:
            raise wire.WireError("an argument refers to an unknown object")
        return _Handle(handle, "", False)

    def _receive(self, tagged, arrays):
        handle = tagged.get("$obj")
        if type(handle) is not int:
            raise wire.WireError("a reply refers to an unknown object")
        self.handles.add(handle)
        return _Handle(handle, str(tagged.get("type", "object"))[:MAX_NAME], bool(tagged.get("callable")))


def _send(value):
    if isinstance(value, _Handle):
        return {"$obj": value.id, "type": value.type, "callable": value.callable} if value.type \
            else {"$obj": value.id}
    return None


def _error(type_name: str, message: str) -> dict:
    return {"ok": False, "error": {"type": type_name, "mro": [type_name, "Exception", "BaseException"],
                                   "message": message}}


def _error_reply(error) -> dict:
    """The implementation's exception by type and message only; never where it was raised."""
    error = error if isinstance(error, dict) else {}
    mro = error.get("mro") if isinstance(error.get("mro"), list) else []
    return {"ok": False, "error": {"type": str(error.get("type", "Exception"))[:MAX_NAME],
                                   "mro": [str(m)[:MAX_NAME] for m in mro[:50]],
                                   "message": str(error.get("message", ""))[:2000]}}


def serve(implementation: Implementation, from_tests: int, to_tests: int, tests_proc, deadline: float):
    """Answer the tests' requests until they close the pipe (they finished) or die.

    Raises :class:`RelayTimeout` at the deadline; malformed frames end the service (the
    tests then fail on their side).
    """
    deadline = CallClock.until(deadline)  # the tests' whole run: a plain deadline
    read = reader(deadline, tests_proc)  # EOFError once the tests' process has exited
    while True:
        try:
            header, arrays = wire.read_frame(from_tests, read)
        except Deadline:
            raise RelayTimeout from None
        except (EOFError, OSError, wire.WireError):
            return
        reply, reply_arrays = implementation.answer(header, arrays)
        try:
            message = wire.frame_parts(reply, reply_arrays)  # the arrays' own memory: no copy
        except wire.WireError as exc:
            message = wire.pack(_error("ValueError", f"the reply cannot cross the wire: {exc}"), [])
        try:
            write_all(to_tests, message, deadline)
        except Deadline:
            raise RelayTimeout from None
        except OSError:
            return
