"""The exercise module as the candidate's own tests see it: a black box.

Copied into the runtime folder of the tests' process. The generated ``<id>.py`` beside the
tests (and one module per kit helper, such as ``gpt2.py``) calls :func:`install`, which fills
the module with one forwarding callable per public name. Each call travels over a pipe to the
grader, which relays it to another process holding the implementation under test (the
reference or a known-wrong version). No source, file or marker of that implementation exists
in this process; only values come back.
Objects that cannot cross the wire (a cache instance) stay there and are used through
:class:`Remote` handles whose methods forward calls too.

Depends on nothing but the standard library, numpy and ``wire`` (copied beside it).
"""
import builtins
import os

import wire

_read, _write = os.read, os.write  # taken before candidate code runs


class _Link:
    def __init__(self, to_grader: int, from_grader: int):
        self.to_grader, self.from_grader = to_grader, from_grader

    def request(self, header: dict, args=(), kwargs=None):
        arrays: list = []
        tree = wire.encode({"args": list(args), "kwargs": dict(kwargs or {})}, arrays, _export)
        data = memoryview(wire.pack(dict(header, args=tree["args"], kwargs=tree["kwargs"]), arrays))
        while data:
            data = data[_write(self.to_grader, data):]
        reply, reply_arrays = wire.read_frame(self.from_grader, _read)
        if reply.get("ok") is True:
            return wire.decode(reply.get("value"), reply_arrays, self._resolve)
        raise _exception(reply.get("error") if isinstance(reply.get("error"), dict) else {})

    def _resolve(self, tagged, arrays):
        if type(tagged.get("$obj")) is not int:
            raise wire.WireError("unknown reference")
        return Remote(self, tagged["$obj"], str(tagged.get("type", "object")))


def _export(value):
    return {"$obj": value._handle} if isinstance(value, Remote) else None


def _exception(error: dict) -> BaseException:
    """The implementation's exception as a local one: a builtin type where the class or one of
    its bases is builtin, so ``pytest.raises(ValueError)`` works on a subclass too."""
    names = [n for n in error.get("mro", []) if isinstance(n, str)] or [str(error.get("type", "Exception"))]
    base = next((getattr(builtins, n) for n in names if isinstance(getattr(builtins, n, None), type)
                 and issubclass(getattr(builtins, n), Exception)), Exception)
    kind = base if base.__name__ == names[0] else type(names[0], (base,), {})
    return kind(str(error.get("message", "")))


class Remote:
    """An object that lives with the implementation: attributes and calls are forwarded."""

    def __init__(self, link: _Link, handle: int, type_name: str):
        self._link, self._handle, self._type_name = link, handle, type_name

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._link.request({"op": "getattr", "target": self._handle, "name": name})

    def __call__(self, *args, **kwargs):
        return self._link.request({"op": "call", "target": self._handle, "name": None}, args, kwargs)

    def __len__(self):
        return self._link.request({"op": "len", "target": self._handle})

    def __repr__(self):
        return f"<{self._type_name}>"


class Public:
    """A public name of the exercise module or a kit helper module (a function or a class)."""

    def __init__(self, link: _Link, module: str, name: str):
        self._link, self._module, self.__name__ = link, module, name

    def __call__(self, *args, **kwargs):
        return self._link.request({"op": "call", "target": None, "module": self._module,
                                   "name": self.__name__}, args, kwargs)

    def __getattr__(self, name):  # a class's static method or constant
        if name.startswith("_"):
            raise AttributeError(name)
        target = self._link.request({"op": "getattr", "target": None, "module": self._module,
                                     "name": self.__name__})
        return getattr(target, name)

    def __repr__(self):
        return f"<{self.__name__}>"


_links: dict = {}  # one per pipe pair, shared by the exercise module and the helpers


def install(namespace: dict, to_grader: int, from_grader: int, module: str, names):
    link = _links.setdefault((to_grader, from_grader), _Link(to_grader, from_grader))
    for name in names:
        namespace[name] = Public(link, module, name)
    namespace["__all__"] = list(names)
