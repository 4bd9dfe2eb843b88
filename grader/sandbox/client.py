"""The grader's side of the sandbox: the candidate's module as hidden checks see it.

Hidden checks call ``candidate.some_function(args)`` as if the module were local; the call
travels to the child (``worker.py``), and what comes back is plain data (numpy arrays,
numbers, strings, tuples, lists) or a handle to an object that stays in the child
(``remote.py``). Faults in candidate code become exceptions of the ``CandidateFault`` family
(``errors.py``), each with one line fit for a report; so does anything the child sends that
the grader cannot use.
"""
from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import random
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import wire
from .errors import (
    BadValue,
    CandidateCrashed,
    CandidateFault,
    CandidateLoadError,
    CandidateRaised,
    CandidateTimeout,
    CandidateUnavailable,
    error_of,
    refused_binding,
)
from .launch import isolation_level
from .policy import Limits
from .remote import CallStats, Lent, RemoteObject
from .shared import SharedArray
from .worker import ModuleToLoad, State, Worker

_FLOORS: dict = {}  # (kit helpers, limits) -> a kit-only child's footprint, once per process
RECORDED_PER_FUNCTION = 24  # module-level calls kept per function, for the general rules' replays
RECORDED_BYTES = 64 << 10  # the largest call (arguments and answer) kept: small inputs replay fast
OWNERSHIP_KEPT = 5  # events of each kind kept for messages


@dataclass
class Recorded:
    """A module-level call that took no object argument, and its answer: copies of both."""
    name: str
    args: tuple
    kwargs: dict
    value: object
    what: str


@dataclass
class Ownership:
    """What the child's probes reported over the candidate's calls (the first few of each kind):
    arguments a call changed, arrays returned earlier that a later call changed, and replies
    that carried no valid probe (which count against the candidate, never for)."""
    probed: int = 0
    changed: list = field(default_factory=list)  # (call, [argument labels])
    moved: list = field(default_factory=list)  # (earlier call, later call)
    aliased: list = field(default_factory=list)  # (earlier call, its argument label, later call)
    again: list = field(default_factory=list)  # (earlier call, later call that handed its writable result back)
    unreported: list = field(default_factory=list)  # calls


def _left(value, budget: int) -> int:
    """``budget`` less the bytes of ``value`` (8 a number or item), or -1 as soon as it is spent or
    ``value`` holds an object living in the child or lent by the grader: one walk, stopped early."""
    if isinstance(value, (RemoteObject, Lent, SharedArray)) or budget < 0:
        return -1
    if isinstance(value, np.ndarray):
        return budget - value.nbytes
    if isinstance(value, (list, tuple, dict)):
        budget -= 8 * len(value)
        for item in (value.values() if isinstance(value, dict) else value):
            budget = _left(item, budget)
            if budget < 0:
                return -1
        return budget
    return budget - 8


LAID_OUT_BYTES = 16 << 20  # arrays up to this size come in any layout; larger ones (rare) in C order


def laid_out(value, seed: int):
    """``value`` with each array (nested in lists, tuples and dicts too) in C order, Fortran order, or
    reversed along every axis (negative strides), as a caller's arrays may be: an answer that reads
    an argument's memory as C order, or writes through a reshape it assumes is a view, is seen by
    whichever check meets it. The layout is a function of the grading seed and the array itself,
    so a rerun of one check sends its arrays as the full run did, and costs no memory in the child."""
    return wire.mapped(value, lambda leaf: _laid_out_array(leaf, seed))


def _laid_out_array(value, seed: int):
    layout = layout_of(value, seed)
    if layout == "F":
        return np.asfortranarray(value)
    return wire.Laid(value, reversed=True) if layout == "reversed" else value


def layout_of(value, seed: int) -> str:
    """The layout ``value`` is sent in ("C", "F" or "reversed"), and lent in (``Sandbox.lend``): a lent
    array told apart by its layout alone would tell the calls whose buffers the grader rewrites."""
    if isinstance(value, np.ndarray) and 1 < value.size and value.nbytes <= LAID_OUT_BYTES and value.ndim:
        head = np.ascontiguousarray(value.flat[:512])
        pick = zlib.crc32(head.view(np.uint8), zlib.crc32(f"{seed}{value.dtype.str}{value.shape}".encode())) % 4
        if pick == 1 and value.ndim > 1:
            return "F"
        if pick == 2:
            return "reversed"
    return "C"


def close_all(sandboxes):
    """End every child of ``sandboxes`` and of those each ends (its twin, its floor): every child is
    asked to exit first, then each is waited for in turn, so they wind down side by side (a child's
    exit, numpy's teardown included, takes tens of milliseconds)."""
    family = [member for sandbox in sandboxes for member in sandbox._family()]
    for member in family:
        member.let_go()
    for member in family:
        member._reap()


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
        self.calls_ok = 0
        self.calls_not_implemented = 0
        self.output_truncated = False  # some child printed past the output cap (the rest was dropped)
        self.spent = 0.0  # seconds of candidate code: loads, calls (their own time, worker.CallClock), own tests
        self._started_at = 0.0
        self.module = RemoteObject(self, None, module.name, False, 0)
        self.ownership = Ownership()
        self.recorded: dict[str, list[Recorded]] = {}  # function name -> calls, for replays
        self.refused: dict[str, list[Recorded]] = {}  # function name -> calls that raised ValueError
        self.recording = True
        self._recordable: dict[str, int] = {}  # calls seen that could be kept, per function
        self._sampler = random.Random(module.seed)
        self._calls_by_id: collections.OrderedDict[tuple, str] = collections.OrderedDict()
        self._released: list[int] = []  # handles of objects no check holds any more, for the next request
        self._released_since_collect = False  # some handle was let go since the child last collected
        self._twin: Sandbox | None = None  # a second child of the same module (see twin)
        self.functions: dict[str, RemoteObject] = {}  # module attribute -> the callable read there first,
        # called by name since (remote.ModuleFunction)
        self._let_go: list[Worker] = []  # children asked to exit and not yet reaped (see let_go)
        self._handed: list[Sandbox] = []  # sandboxes whose children close reaps too (a measured floor)
        self._launched_floor = False  # this sandbox launched the kit-only floor child (see launch_floor)
        # binder(where, name, args, kwargs) -> (args, kwargs, how) or None: the binding a candidate call goes out
        # in (checking.binding, set by the checks' side); where is "module" (a function or class) or "method"
        self.binder = None
        self.binding_refusals: list[str] = []  # calls refused in a drawn binding, then answered as written

    def launch(self) -> Sandbox:
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

    def running(self) -> bool:
        """Whether the child has imported the module and is alive: a request goes to it as it is."""
        return self.worker is not None and self.worker.state is State.READY and self.worker.alive()

    def start(self) -> Sandbox:
        """Start the child and import the module; a failed import is kept in ``load_error``."""
        if self.running():
            return self
        if self.load_error:
            raise CandidateUnavailable(self.load_error)
        if self.worker is not None and (self.worker.state is not State.LOADING or not self.worker.alive()):
            self._discard_worker()
        self.launch()
        try:
            self.worker.finish_load()
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
        return self.worker.isolation if self.worker else isolation_level(self.limits)

    @property
    def output_note(self) -> str | None:
        """The line a result carries when a child printed past the output cap (else None)."""
        truncated = self.output_truncated or any(w.output_truncated for w in [self.worker, *self._let_go] if w)
        return f"output truncated after {self.limits.output_bytes >> 20} MiB" if truncated else None

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
        """End every child this sandbox started (see :func:`close_all`)."""
        close_all([self])

    def let_go(self):
        """Ask the child to exit and let go of it without waiting: it winds down beside whatever
        the grader does next, and ``close`` (of this sandbox, or of the one it was handed to)
        reaps it. A later request starts a fresh child."""
        if self.worker is not None:
            self.worker.ask_to_exit()
            self._let_go.append(self.worker)
            self.worker = None

    def _family(self) -> list[Sandbox]:
        """This sandbox and those whose children it ends: its twin, the floor it launched if
        nothing measured it (not kept running), a measured floor it was handed."""
        family = [self, *([self._twin] if self._twin is not None else []), *self._handed]
        pending = _FLOORS.get(self._floor_key())
        if self._launched_floor and isinstance(pending, Sandbox):
            del _FLOORS[self._floor_key()]
            family.append(pending)
        self._handed = []
        return family

    def _reap(self):
        """Wait for (or, after a second, kill) every child let go, and remove its scratch."""
        while self._let_go:
            worker = self._let_go.pop(0)
            self.output_truncated |= worker.output_truncated
            worker.stop()

    @contextlib.contextmanager
    def patient(self, seconds: float):
        """Calls made inside wait up to ``seconds`` each, not ``Limits.call_seconds``: for a call whose
        correct answers may be slow (a per-node walk of a chain 10,000 deep). The exercise's budget
        still bounds them."""
        saved = self.limits
        self.limits = dataclasses.replace(saved, call_seconds=max(seconds, saved.call_seconds))
        try:
            if self.worker is not None:
                self.worker.limits = self.limits
            yield
        finally:
            self.limits = saved
            if self.worker is not None:
                self.worker.limits = saved

    def launch_twin(self):
        """Start a second child of the same module now, without waiting, so its import overlaps
        the checks: the general rules ask it new calls before the first child has seen them."""
        if self._twin is None and not self.load_error:
            self._twin = Sandbox(self.spec, self.limits)
            try:
                self._twin.launch()
            except CandidateFault:
                pass  # its calls will say why

    def twin(self) -> Sandbox:
        """The second child (launched now if it was not): a fresh process, whatever the first did."""
        self.launch_twin()
        return self._twin

    def spare(self) -> Sandbox:
        """The twin (a fresh process, nothing called in it yet), handed over for one check's own calls, and a
        new twin launched in its place now, its import overlapping the checks, for the general rules' fresh
        calls. The one handed over is reaped with this sandbox."""
        wanted = self._twin is not None  # launched for the general rules: they get another
        handed = self.twin()
        self._handed.append(handed)
        self._twin = None
        if wanted:
            self.launch_twin()
        return handed

    def _discard_worker(self, polite: bool = True):
        if self.worker is not None:
            self.output_truncated |= self.worker.output_truncated
            self.worker.stop(polite)
            self.worker = None

    def _fault(self, exc: CandidateFault) -> CandidateFault:
        self.faults.append(str(exc))
        self._discard_worker(polite=False)
        return exc

    def request(self, obj: RemoteObject, header: dict, what: str, args=(), kwargs=None,
                measure=False) -> tuple[object, CallStats]:
        """One operation on ``obj`` in the child: (value, stats). Whatever the child sends that
        the grader cannot use is the candidate's fault (``BadValue``), never the grader's. A candidate's
        call goes out in the binding ``binder`` draws; one the answer refuses with Python's own binding
        TypeError goes again as written, and the refusal is kept (``binding_refusals``)."""
        kwargs = kwargs or {}
        bound = None
        if self.binder and header["op"] == "call" and not obj.kit and header.get("name"):
            bound = self.binder("module" if obj.handle is None else "method", header["name"], list(args), kwargs)
        if bound is None:
            return self._request(obj, header, what, args, kwargs, measure, (args, kwargs))
        try:
            return self._request(obj, header, f"{what} ({bound[2]})", args, kwargs, measure, bound[:2])
        except CandidateRaised as exc:
            if not (exc.is_a("TypeError") and refused_binding(exc.message)):
                raise
            self.binding_refusals.append(f"{what} raised TypeError ({exc.message[:120]}) when {bound[2]}")
        return self._request(obj, header, what, args, kwargs, measure, (args, kwargs))

    def _request(self, obj: RemoteObject, header: dict, what: str, args, kwargs, measure, sent):
        self._check_budget()
        self.start()
        if obj.generation not in (0, self.generation):
            raise CandidateUnavailable(f"{what}: this {obj.type_name} was lost when the "
                                       "candidate process restarted after an earlier fault")
        worker = self.worker
        kit = obj.kit or header["op"] == "import"  # the kit's helpers are not the candidate's code
        probed = header["op"] == "call" and not kit
        name = header.get("name") if obj.handle is None else obj.module_attr  # a module function's, to record
        if probed:  # the candidate's own call: its arrays come in any layout (CONTRACT section 1)
            sent = laid_out(sent, self.spec.seed)
        tree, arrays = worker.encode_args({"args": list(sent[0]), "kwargs": dict(sent[1])})
        header = dict(header, target=obj.handle, args=tree["args"], kwargs=tree["kwargs"], probe=probed,
                      release=self._released[:])
        self._released.clear()
        began, worker.last_wait = time.monotonic(), None
        worker.budget_left = self.limits.exercise_seconds - self.spent
        try:
            reply, reply_arrays, stats = worker.request(header, arrays, what, measure)
        except (CandidateTimeout, CandidateCrashed, BadValue) as exc:
            raise self._fault(exc) from None
        finally:
            worker.hosts.clear()
            # the child's own time (worker.CallClock): a busy machine's load is not charged to the candidate
            wait = worker.last_wait
            self.spent += wait.own_seconds() if wait is not None else time.monotonic() - began
        if probed:
            self._take_probe(reply, what)
        try:
            value = self._value_of(reply, reply_arrays, what, kit)
        except (BadValue, wire.WireError) as exc:
            raise self._fault(BadValue(f"{what} sent back data the grader cannot read ({exc})")) from None
        except CandidateRaised as exc:
            if probed and name and self.recording and exc.is_a("ValueError"):
                self._record_refused(name, args, kwargs or {}, what)
            raise
        except Exception as exc:  # noqa: BLE001  anything else the child's data triggers is its fault
            raise self._fault(BadValue(f"{what} sent back a reply the grader cannot use "
                                       f"({type(exc).__name__}: {str(exc)[:200]})")) from None
        self.calls_ok += probed
        if header["op"] == "getattr" and obj.handle is None and isinstance(value, RemoteObject):
            value.module_attr = header["name"]
        if probed and name and self.recording:
            self._record(name, args, kwargs or {}, value, what)
        return value, stats

    def _take_probe(self, reply: dict, what: str):
        """Keep what the child's probe says about this call; a missing or malformed probe is kept
        as unreported (the reply is the child's word: only well-typed fields count)."""
        own = self.ownership
        own.probed += 1
        probe = reply.get("probe")
        self._calls_by_id[self.generation, reply.get("id")] = what
        while len(self._calls_by_id) > 256:
            self._calls_by_id.popitem(last=False)
        changed = probe.get("changed") if isinstance(probe, dict) else None
        moved = probe.get("moved") if isinstance(probe, dict) else None
        aliased = probe.get("aliased") if isinstance(probe, dict) else None
        again = probe.get("again") if isinstance(probe, dict) else None
        pairs = (moved, again)  # [request id, index] each
        if not (isinstance(changed, list) and all(isinstance(c, str) for c in changed)
                and all(isinstance(p, list) and all(isinstance(m, list) and len(m) == 2
                                                    and all(type(x) is int for x in m) for m in p) for p in pairs)
                and isinstance(aliased, list) and all(isinstance(a, list) and len(a) == 2 and type(a[0]) is int
                                                      and isinstance(a[1], str) for a in aliased)):
            if len(own.unreported) < OWNERSHIP_KEPT:
                own.unreported.append(what)
            return
        if changed and len(own.changed) < OWNERSHIP_KEPT:
            own.changed.append((what, [c[:40] for c in changed[:10]]))
        for request, _ in moved[:OWNERSHIP_KEPT - len(own.moved)]:
            own.moved.append((self._calls_by_id.get((self.generation, request), "an earlier call"), what))
        for request, _ in again[:OWNERSHIP_KEPT - len(own.again)]:
            own.again.append((self._calls_by_id.get((self.generation, request), "an earlier call"), what))
        for request, label in aliased[:OWNERSHIP_KEPT - len(own.aliased)]:
            own.aliased.append((self._calls_by_id.get((self.generation, request), "an earlier call"), label[:40], what))

    def _record(self, name, args, kwargs, value, what):
        """Keep a copy of a small module-level call on data only, for the general rules to replay:
        a sample of every such call, the same for the same seed and calls (reservoir sampling)."""
        if _left((args, kwargs, value), RECORDED_BYTES) < 0:  # small calls on data only
            return
        kept = self.recorded.setdefault(name, [])
        seen = self._recordable[name] = self._recordable.get(name, 0) + 1
        slot = len(kept) if len(kept) < RECORDED_PER_FUNCTION else self._sampler.randrange(seen)
        if slot < RECORDED_PER_FUNCTION:
            call = Recorded(name, copy.deepcopy(tuple(args)), copy.deepcopy(dict(kwargs)), copy.deepcopy(value), what)
            kept[slot:slot + 1] = [call]

    def _record_refused(self, name, args, kwargs, what):
        """Keep a copy of a small module-level call on data only that raised ValueError (the first
        ``RECORDED_PER_FUNCTION`` of each function), for the general rules to ask again."""
        kept = self.refused.setdefault(name, [])
        if len(kept) < RECORDED_PER_FUNCTION and _left((args, kwargs), RECORDED_BYTES) >= 0:
            kept.append(Recorded(name, copy.deepcopy(tuple(args)), copy.deepcopy(dict(kwargs)), None, what))

    def _value_of(self, reply: dict, arrays, what: str, kit: bool):
        ok = reply.get("ok")
        if ok is False:  # the reply is the child's word: only well-formed fields count
            error = error_of(reply)
            if reply.get("bad_value") is True:
                raise BadValue(f"{what} returned a value the grader cannot read: {error['message']}")
            if error["type"] == "NotImplementedError":
                self.calls_not_implemented += 1
            raise CandidateRaised(what, error, self.limits)
        if ok is not True:
            raise BadValue(f"a reply without a valid 'ok' field ({str(ok)[:40]})")
        return wire.decode(reply.get("value"), arrays, lambda tagged, arrays: self._resolve(tagged, kit))

    def collect(self):
        """When the grader has let go of some object since the last time: the objects no check holds
        any more are dropped in the child and its garbage collected, in a request of its own (a live
        child only). Made at the start of checks of an exercise that measures, so the footprint a
        measured call sees is what the candidate holds now, not what earlier checks left behind."""
        if not self._released_since_collect:
            return  # nothing the grader held was let go: the child holds only what it chose to
        self._released_since_collect = False
        if self.worker is not None and self.worker.state is State.READY and self.worker.alive():
            try:
                self.request(self.module, {"op": "collect"}, "collect garbage before a check")
            except CandidateFault:
                pass  # the check's own calls say what went wrong

    def launch_floor(self):
        """Start the kit-only child of :meth:`floor_bytes` now, without waiting, so its import
        overlaps the checks (once per process and set of kit helpers)."""
        key = self._floor_key()
        if key not in _FLOORS:
            helpers = "".join(f"import {Path(str(f)).stem}\n" for f in self.spec.helper_files)
            source = f"import numpy\n{helpers}\ndef kvgrade_idle():\n    return None\n".encode()
            _FLOORS[key] = Sandbox(ModuleToLoad(self.spec.name, [(f"{self.spec.name}.py", source)],
                                                self.spec.helper_files, seed=self.spec.seed), self.limits)
            self._launched_floor = True  # its close ends the floor if nothing measured it (never a twin's)
            try:
                _FLOORS[key].launch()
            except CandidateFault:
                pass  # floor_bytes says None

    def floor_bytes(self) -> int | None:
        """The whole footprint of a child that imported numpy and this exercise's kit helpers and
        holds nothing else, measured by the same meter during one call (None: not measurable).
        A measured call's budget starts here, never at a figure the candidate's child sets."""
        self.launch_floor()
        key = self._floor_key()
        idle = _FLOORS[key]
        if isinstance(idle, Sandbox):
            try:
                _FLOORS[key] = idle.module.measured("kvgrade_idle")[1].peak_bytes
            except CandidateFault:
                _FLOORS[key] = None
            finally:
                idle.let_go()  # it winds down beside the measured call; this sandbox's close reaps it
                self._handed.append(idle)
        return _FLOORS[key]

    def _floor_key(self):
        return tuple(str(f) for f in self.spec.helper_files), self.limits

    def release(self, obj: RemoteObject):
        if obj.handle is not None and obj.generation == self.generation and self.worker is not None:
            self._released.append(obj.handle)
            self._released_since_collect = True

    def lend(self, arr: np.ndarray) -> SharedArray:
        """A copy of ``arr`` in memory the child shares with the grader: passed to a call, the child
        sees the caller's own buffer, which the grader can rewrite and read back afterwards without
        asking the child (``shared.py``)."""
        self.start()
        return self.worker.arena.place(arr, layout_of(np.asarray(arr), self.spec.seed))

    def helper(self, name: str) -> RemoteObject:
        """A kit helper module imported in the child (e.g. ``gpt2``), to build its objects there."""
        return self.request(self.module, {"op": "import", "name": name}, f"import {name}")[0]

    def _resolve(self, tagged, kit=False):
        if "$obj" in tagged and type(tagged["$obj"]) is int:
            return RemoteObject(self, tagged["$obj"], str(tagged.get("type", "object"))[:100],
                                tagged.get("callable") is True, self.generation, kit)
        raise BadValue(f"the candidate sent an unknown reference {sorted(tagged)[:5]}")
