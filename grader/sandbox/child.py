"""The child process: imports one candidate module and serves calls from the grader.

Run as ``python -s -P -B child.py IN_FD OUT_FD`` from a scratch directory. It only ever sends
values back (JSON and .npy bytes, see ``wire.py``); every verdict is made by the grader, and
every figure a verdict rests on (memory, time) is measured by the grader. Every frame sent
back carries the id of the request it answers.
Objects that cannot cross the wire (a cache instance, a bound method) stay here and travel
as handles. Objects the grader lends (``{"$host": ...}``, such as a KV source) become local
stand-ins whose methods ask the grader over the same pipes.
"""
import importlib.util
import os
import signal
import sys
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402  (our sibling, copied beside us)

del sys.path[0]
import numpy as np  # noqa: E402

# Captured before candidate code runs, so a monkeypatched os does not cut the line.
_read, _write = os.read, os.write


class Host:
    """Talks to the grader: replies to requests, asks it for callbacks."""

    def __init__(self, in_fd, out_fd):
        self.in_fd, self.out_fd = in_fd, out_fd
        self.objects, self.next_id = {}, 1
        self.request_id = None  # the request being served: every frame we send carries it

    def send(self, header, arrays=()):
        wire.write_frame(self.out_fd, dict(header, id=self.request_id), list(arrays))

    def receive(self):
        return wire.read_frame(self.in_fd, _read)

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
        raise wire.WireError(f"unknown reference {sorted(tagged)}")

    def encode_reply(self, value, **extra):
        arrays = []
        tree = wire.encode(value, arrays, self.export)
        self.send(dict(extra, ok=True, value=tree), arrays)

    def callback(self, host_id, name, args):
        arrays = []
        tree = wire.encode(list(args), arrays, self.export)
        self.send({"op": "callback", "host": host_id, "name": name, "args": tree}, arrays)
        header, arrays = self.receive()
        if not header.get("ok"):
            raise RuntimeError(header.get("error", "the grader refused the callback"))
        return wire.decode(header["value"], arrays, self.resolve)


def make_host_proxy(host, tagged, arrays):
    """A local stand-in for an object the grader lends, e.g. the KV source of a kernel."""
    attrs = wire.decode(tagged.get("attrs", {}), arrays, host.resolve)
    namespace = {}
    for name in tagged.get("methods", []):
        namespace[name] = (lambda n: lambda self, *a: host.callback(tagged["$host"], n, a))(name)
    if "len" in tagged:
        namespace["__len__"] = lambda self: tagged["len"]
    proxy = type(str(tagged.get("type", "HostObject")), (), namespace)()
    for key, value in attrs.items():
        setattr(proxy, key, value)
    return proxy


def error_reply(exc):
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(tb):
        if "kvgrade-runtime" not in frame.filename:
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


def run_call(host, header, arrays, module):
    target = module if header.get("target") is None else host.objects[header["target"]]
    op = header["op"]
    if op == "import":  # a kit helper such as gpt2, so checks can build its objects here
        return importlib.import_module(header["name"])
    if op == "getattr":
        return getattr(target, header["name"])
    if op == "len":
        return len(target)
    if op == "call":
        fn = target if header.get("name") is None else getattr(target, header["name"])
        args = wire.decode(header.get("args", []), arrays, host.resolve)
        kwargs = wire.decode(header.get("kwargs", {}), arrays, host.resolve)
        if header.get("measure"):  # the grader reads the memory baseline now, the arguments in place
            host.send({"op": "ready"})
            go, _ = host.receive()
            if go.get("op") != "go":
                raise wire.WireError("the grader did not start the measured call")
        return fn(*args, **kwargs)
    raise wire.WireError(f"unknown operation {op!r}")


def serve(host, module):
    while True:
        header, arrays = host.receive()
        if header.get("op") == "exit":
            return
        host.request_id = header.get("id")
        # numpy's defaults: exp of a very negative score underflows in any correct softmax
        np.seterr(all="warn", under="ignore")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value, failure = run_call(host, header, arrays, module), None
            except BaseException as exc:  # noqa: BLE001  (SystemExit too: report, keep serving)
                value, failure = None, exc
        said = {"warnings": [f"{w.category.__name__}: {w.message}" for w in caught][:20]}
        if failure is not None:
            host.send(dict(error_reply(failure), **said))
            continue
        try:
            host.encode_reply(value, **said)
        except wire.WireError as exc:
            host.send(dict(error_reply(exc), **said, bad_value=True))


def main():
    in_fd, out_fd = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over the output cap: writes fail, we live
    host = Host(in_fd, out_fd)
    header, _ = host.receive()  # {"op": "load", "id": ..., "path": ..., "name": ..., "sys_path": [...]}
    host.request_id = header.get("id")
    sys.path[:0] = header["sys_path"]
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
