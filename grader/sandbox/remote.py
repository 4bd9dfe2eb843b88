"""What hidden checks hold: proxies for values living in the child (``RemoteObject``), the base
of objects the grader lends to it (``Lent``), and the figures a measured call returns."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import BadValue


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
    """What a measured call cost. ``peak_bytes``: the child's whole footprint at its highest
    during the request, as the kernel counts it for the child and all it forked (``peak_source``
    "cgroup"), or the child's own high-water mark ("vmhwm") where no cgroup can be had; None if
    neither could be read. ``before_bytes``: the footprint as the request was written.
    ``warnings``: what the child reported (numpy warnings); they may count against a candidate,
    never for one. ``seconds``: wall time of the round trip, measured by the grader."""

    seconds: float = 0.0
    peak_bytes: int | None = None
    peak_source: str | None = None
    warnings: list = field(default_factory=list)
    before_bytes: int | None = None


class RemoteObject:
    """A value that lives in the child: the module itself, an instance, a function."""

    def __init__(self, sandbox, handle, type_name: str, is_callable: bool, generation: int, kit: bool = False):
        self._sandbox, self.handle, self.type_name = sandbox, handle, type_name
        self.is_callable, self.generation = is_callable, generation
        self.kit = kit  # made by a kit helper (ex.helper): its calls do not count as attempts
        self.module_attr: str | None = None  # the module's attribute it is (a function read off the module)

    def _label(self, name=None):
        base = "" if self.handle is None else f"{self.type_name}."
        return f"{base}{name}" if name else self.type_name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        functions = self._sandbox.functions if self.handle is None and not self.kit else None  # the module's
        known = functions.get(name) if functions is not None else None
        if known is None or known.generation != self._sandbox.generation or not self._sandbox.running():
            known = self._sandbox.request(self, {"op": "getattr", "name": name}, self._label(name))[0]
            if functions is None or not isinstance(known, RemoteObject) or not known.is_callable or known.kit:
                return known  # a value, or an attribute of an object other than the module
            functions[name] = known  # kept: its handle is never dropped, so the child has nothing to collect
        return ModuleFunction(self._sandbox, name, known.type_name, known.generation)

    def __call__(self, *args, **kwargs):
        what = call_text(self.type_name, args, kwargs)
        return self._sandbox.request(self, {"op": "call", "name": None}, what, args, kwargs)[0]

    def __len__(self):
        value = self._sandbox.request(self, {"op": "len"}, f"len({self.type_name})")[0]
        if type(value) is not int or value < 0:  # len() itself would raise in the grader
            raise BadValue(f"len({self.type_name}) returned {describe(value)[:80]}; expected an int >= 0")
        return value

    def call(self, name, *args, **kwargs):
        """Call method ``name`` in one round trip (what ``obj.name(...)`` does in two)."""
        return self.with_stats(name, *args, **kwargs)[0]

    def measured(self, name, *args, **kwargs) -> tuple[object, CallStats]:
        """``call(name, ...)``, returning ``(value, stats)``: its memory peak, measured by the
        grader, and the warnings the child reported."""
        what = call_text(self._label(name), args, kwargs)
        return self._sandbox.request(self, {"op": "call", "name": name}, what, args, kwargs, True)

    def with_stats(self, name, *args, **kwargs) -> tuple[object, CallStats]:
        """``call(name, ...)``, returning ``(value, stats)`` without measuring memory (one
        round trip fewer): the warnings the child reported and the time it took."""
        what = call_text(self._label(name), args, kwargs)
        return self._sandbox.request(self, {"op": "call", "name": name}, what, args, kwargs, False)

    def __repr__(self):
        return f"<candidate {self.type_name}>"

    def __del__(self):
        # the child may drop its object once no check holds it: its memory is the child's footprint
        try:
            self._sandbox.release(self)
        except Exception:  # noqa: BLE001  (interpreter shutdown, a half-built proxy)
            pass


class ModuleFunction(RemoteObject):
    """``module.name`` where the module's attribute ``name`` was a callable when the running child
    was first asked for it (``Sandbox.functions`` keeps that handle, read once per child): a call
    is one request that reads the attribute in the child as it calls, as ``module.f(...)`` does, so
    a function the module rebinds is the one called; with a handle per access, each call cost a
    request to read the attribute, one to call it, and a handle for the child to drop (and collect
    before the next check of an exercise that measures memory). Anything but a call reads the
    attribute again, as a handle. Like a handle, it belongs to the child that was running when it
    was made: ``Sandbox.request`` refuses it after a restart, and the module gives a new one."""

    def __init__(self, sandbox, name: str, label: str, generation: int):
        super().__init__(sandbox, None, label, True, generation)
        self.module_attr = name

    def __call__(self, *args, **kwargs):
        what = call_text(self.type_name, args, kwargs)
        return self._sandbox.request(self, {"op": "call", "name": self.module_attr}, what, args, kwargs)[0]

    def read_again(self) -> RemoteObject:
        """The module's attribute as it is now, as a handle."""
        return self._sandbox.request(self, {"op": "getattr", "name": self.module_attr}, self.module_attr)[0]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.read_again(), name)

    def __len__(self):
        return len(self.read_again())

    def measured(self, name, *args, **kwargs) -> tuple[object, CallStats]:
        return self.read_again().measured(name, *args, **kwargs)

    def with_stats(self, name, *args, **kwargs) -> tuple[object, CallStats]:
        return self.read_again().with_stats(name, *args, **kwargs)
