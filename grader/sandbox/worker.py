"""One child process holding one imported candidate module, and the conversation with it.

Every request carries an id; every frame the child sends back (a callback, the reply) must
carry the same id, so a stray frame is a fault of the
candidate's and can never shift later replies. Every wait has a deadline.
"""
from __future__ import annotations

import enum
import itertools
import os
import select
import signal
import sys
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from . import wire
from .errors import BadValue, CandidateCrashed, CandidateLoadError, CandidateRaised, CandidateTimeout, error_of
from .launch import Child, Limits, Scratch, describe_exit, exit_status, kill, spawn
from .remote import CallStats, Lent, RemoteObject
from .shared import Arena, SharedArray

# each lent object's token, for as long as the grader holds it: lent again, it is the child's same stand-in
_TOKENS, _TOKEN_OF = itertools.count(1), weakref.WeakKeyDictionary()


@dataclass
class ModuleToLoad:
    name: str  # the module name the candidate's code expects, e.g. "decode_mask"
    candidate_files: list  # (name, bytes) or paths, copied into the child's candidate/ folder
    helper_files: list  # kit helpers; copied into kit/, which comes first on sys.path
    refused: str | None = None  # why the candidate's files were not read: the exercise's load error
    seed: int = 0  # the grading seed: which calls are sampled and how arrays are laid out (never sent to the child)


class State(enum.Enum):
    NEW = "new"  # no process yet
    LOADING = "loading"  # started; the import was sent, its answer not yet read
    READY = "ready"  # imported; serving calls
    STOPPED = "stopped"  # ended (by us, or it died); never restarted: the Sandbox makes a new one


class Worker:
    """One child process holding one imported candidate module."""

    def __init__(self, module: ModuleToLoad, limits: Limits):
        self.module, self.limits = module, limits
        self.scratch = Scratch()
        self.child: Child | None = None
        self.state = State.NEW
        self.hosts: dict[int, Lent] = {}
        self._last_id = 0
        self.arena: Arena | None = None  # memory lent to the child as a caller's own buffers (shared.py)
        self._exit_asked = False  # the exit request was written (ask_to_exit); stop only waits for it
        self.last_wait: CallClock | None = None  # the clock of the latest request's wait
        self.budget_left: float | None = None  # seconds left of the exercise's budget (Sandbox sets it)

    def launch(self):
        """Start the child and send it the module to import; :meth:`finish_load` waits for it."""
        runtime = self.scratch.add_runtime()
        kit = self.scratch.add_files("kit", self.module.helper_files)
        cand = self.scratch.add_files("candidate", self.module.candidate_files)
        self.arena = Arena()
        shared = [self.arena.fd, self.arena.size]  # the child's descriptor has the same number
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        try:
            self.child = spawn([str(runtime), str(to_child_r), str(from_child_w)], self.scratch, self.limits,
                               pass_fds=(to_child_r, from_child_w, self.arena.fd))
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
            self.arena.close_descriptor()
        self.state = State.LOADING
        os.set_blocking(self.to_child, False)  # writes wait with a deadline, see _write
        load = {"op": "load", "id": self._new_id(), "name": self.module.name,
                "path": str(cand / f"{self.module.name}.py"), "sys_path": [str(kit), str(cand)], "shared": shared}
        try:  # the child imports while other children start; finish_load reads its answer
            self._write(wire.pack(load, []), CallClock(self.limits.load_seconds, self.child))
        except (Deadline, OSError):
            pass  # it died at once: finish_load reports how

    def finish_load(self):
        what = f"importing {self.module.name}"
        header, _ = self._exchange(None, [], self.limits.load_seconds, what)
        if header.get("ok") is not True:
            raise CandidateLoadError(str(CandidateRaised(f"{what}.py", error_of(header))))
        self.state = State.READY

    @property
    def isolation(self) -> str:
        return self.child.level if self.child else "process"

    @property
    def output_truncated(self) -> bool:
        return self.scratch.output is not None and self.scratch.output.truncated

    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def ask_to_exit(self):
        """Write the exit request without waiting for the child to end (``stop`` then waits for it):
        children asked together wind down side by side, and beside whatever the grader does next."""
        if self.child is not None and not self._exit_asked and self.child.poll() is None:
            self._exit_asked = True
            try:
                self._write(wire.pack({"op": "exit", "id": self._new_id()}, []), CallClock(0.5))
            except Exception:  # noqa: BLE001  any trouble: stop kills it
                pass

    def stop(self, polite: bool = True):
        """End the child: asked to exit (a second at most) when ``polite``, else killed at once (a
        child that just faulted may be anywhere in its own code, and owes no grace)."""
        if self.child is not None:
            if polite and self.child.poll() is None:
                try:
                    self.ask_to_exit()
                    self.child.wait(timeout=1)
                except Exception:  # noqa: BLE001  any trouble: it is killed below
                    pass
            kill(self.child)
            for fd in (self.to_child, self.from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.state = State.STOPPED
        self.scratch.remove()

    def _new_id(self) -> int:
        self._last_id += 1
        return self._last_id

    # -- arguments: grader objects lent by reference ---------------------------------------
    def _export(self, value):
        if isinstance(value, Lent):
            handle = len(self.hosts) + 1
            self.hosts[handle] = value
            arrays: list = []
            attrs = wire.encode(value.wire_attrs(), arrays)
            same = _TOKEN_OF.setdefault(value, next(_TOKENS))  # handles are per request; this is per object
            return {"$host": handle, "same": same, "type": value.wire_type, "methods": list(value.wire_methods),
                    "attrs": attrs, "len": value.wire_len(), "_arrays": arrays}
        if isinstance(value, RemoteObject):
            if value.handle is None:  # the module, or one of its functions called by name (remote.ModuleFunction)
                raise wire.WireError("the candidate's module and the functions called off it are not passed as "
                                     "arguments (a ModuleFunction's read_again() is a handle)")
            return {"$obj": value.handle}
        if isinstance(value, SharedArray):
            if value.arena is not self.arena:
                raise wire.WireError("a buffer lent to an earlier candidate process cannot reach this one")
            return value.tag()
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

    # -- one request, with the callbacks it triggers -----------------------------------------
    def request(self, header: dict, arrays, what: str, measure: bool = False):
        """Send ``header`` (given a fresh id) and wait for its reply: (reply, arrays, CallStats).

        ``measure``: the kernel's figure for the child's whole footprint, from before the request
        is written to after the reply is read; nothing in the request says it is measured."""
        header = dict(header, id=self._new_id())
        began = time.monotonic()
        meter = _meter(self.child) if measure else None
        if meter is not None:
            meter.begin()
        reply, reply_arrays = self._exchange(header, arrays, self.limits.call_seconds, what)
        peak, source, before = meter.result() if meter else (None, None, None)
        stats = CallStats(time.monotonic() - began, peak, source, _warnings_of(reply), before)
        return reply, reply_arrays, stats

    def _exchange(self, header, arrays, timeout, what):
        """Send a request (None: the load, already sent) and wait for its reply, serving callbacks."""
        deadline = CallClock(timeout, self.child, self.budget_left)
        expected = header["id"] if header is not None else self._last_id
        self.last_wait = deadline  # what the exercise's budget is charged for it (Sandbox._call)
        try:
            if header is not None:
                self._write(wire.frame_parts(header, arrays), deadline)
            while True:
                reply, reply_arrays = wire.read_frame(self.from_child, self._reader(deadline))
                wire.refuse_widening(reply_arrays)
                if reply.get("id") != expected or type(reply.get("id")) is not int:
                    raise BadValue(f"{what}: the candidate process sent a frame out of turn "
                                   f"(for request {str(reply.get('id'))[:20]}, not {expected})")
                op = reply.get("op")
                if op == "callback":
                    self._serve_callback(reply, reply_arrays, deadline)
                elif op is None:
                    return reply, reply_arrays
                else:
                    raise BadValue(f"{what}: the candidate process sent an unexpected {str(op)[:40]!r} frame")
        except Deadline:
            kill(self.child)
            raise CandidateTimeout(f"{what} did not finish within {timeout:g} s{deadline.stretch_note()}; "
                                   "the candidate process was stopped") from None
        except (EOFError, OSError):
            raise self._crashed(what) from None
        except wire.WireError as exc:
            kill(self.child)
            raise BadValue(f"{what} sent back data the grader cannot read ({exc})") from None
        except BadValue:
            kill(self.child)
            raise

    def _reader(self, deadline):
        return reader(deadline, self.child)

    def _crashed(self, what) -> CandidateCrashed:
        try:
            self.child.wait(timeout=2)
        except Exception:  # noqa: BLE001  still running: killed below
            pass
        code = exit_status(self.child)
        bound = self._bound_reached(code)
        kill(self.child)
        tail = self.scratch.output_tail(160).splitlines()
        last = f"; its last output: {tail[-1][:160]!r}" if tail else ""
        reached = f"; it reached {bound}" if bound else ""
        return CandidateCrashed(f"the candidate process died during {what}: {describe_exit(code)}{reached}{last}")

    def _bound_reached(self, code) -> str | None:
        """The limit, with its value, that explains how the child ended (None: none we know of)."""
        if code == -signal.SIGXCPU:
            return f"the CPU time limit of {self.limits.cpu_seconds} s"
        group = self.child.group
        if code == -signal.SIGKILL and group is not None and group.reached_memory_limit():
            return f"the memory limit of {self.limits.memory_bytes >> 20} MiB"
        return None

    def _write(self, data, deadline: CallClock):
        write_all(self.to_child, data, deadline)

    def _serve_callback(self, request, arrays, deadline):
        host = self.hosts.get(request.get("host")) if type(request.get("host")) is int else None
        name = request.get("name")
        try:
            if host is None or not isinstance(name, str) or name not in host.wire_methods:
                raise ValueError(f"no such method {str(name)[:80]!r}")
            args = wire.decode(request.get("args", []), arrays)
            if not isinstance(args, list):
                raise ValueError("callback arguments must be a list")
            value = getattr(host, name)(*args)
            out_arrays: list = []
            reply = wire.pack({"ok": True, "id": request["id"], "value": wire.encode(value, out_arrays)}, out_arrays)
        except Exception as exc:  # noqa: BLE001  the candidate asked for something invalid
            error = f"{type(exc).__name__}: {str(exc)[:500]}"
            reply = wire.pack({"ok": False, "id": request["id"], "error": error}, [])
        self._write(reply, deadline)


def _warnings_of(reply: dict) -> list:
    """The child's warnings: candidate-controlled, so only well-typed ones count."""
    warnings = reply.get("warnings")
    return [w[:500] for w in warnings[:20] if isinstance(w, str)] if isinstance(warnings, list) else []


class Deadline(Exception):
    """A read or write on a child's pipe reached its deadline."""


STARVED_STRETCH = 4  # a call starved of CPU by a busy machine may take this many times its deadline
POLL_SECONDS = 0.25  # how often a wait looks at the child's state


class CallClock:
    """The deadline of one wait on a child: ``seconds`` of wall clock, stretched while ``child`` is
    runnable (computing, or waiting for a CPU the machine gives to others) yet has used less than
    ``seconds`` of CPU in the wait, up to ``STARVED_STRETCH`` times ``seconds``, and never once its own
    time (``own_seconds``) has used what is left of the exercise's budget. So a correct, slow
    answer gets the same verdict on a busy machine (batch grading on every core, a CI run) as on a
    quiet one, and a child that sleeps or blocks, or computes at full speed, is stopped on time.
    Without a child, or where its CPU time cannot be read, a plain deadline. ``own_seconds`` is what
    the wait charges the exercise's budget, by the same rule."""

    def __init__(self, seconds: float, child: Child | None = None, budget_left: float | None = None):
        self.seconds, self.child, self.start = seconds, child, time.monotonic()
        self.budget_left = float("inf") if budget_left is None else budget_left
        self.cpu_at_start = self._cpu()
        self.stretched = False
        self.polls, self.runnable_polls = 0, 0  # looks at the child's state during the wait (sample)

    @classmethod
    def until(cls, at: float) -> CallClock:
        """A plain deadline at ``time.monotonic()`` value ``at``."""
        return cls(at - time.monotonic())

    def _cpu(self) -> float | None:
        try:
            return self.child.cpu_seconds() if self.child is not None else None
        except OSError:
            return None

    def remaining(self) -> float:
        """Seconds to wait before looking again; 0 or less once the deadline has passed."""
        elapsed = time.monotonic() - self.start
        if elapsed < self.seconds or self.cpu_at_start is None:
            return self.seconds - elapsed
        if elapsed >= STARVED_STRETCH * self.seconds:
            return 0.0
        used = self._cpu()
        if (used is None or used - self.cpu_at_start >= self.seconds or not self.child.runnable()
                or self.own_seconds(used) >= self.budget_left):
            return 0.0
        self.stretched = True
        return POLL_SECONDS

    def sample(self):
        """Called each time a wait finds nothing yet to read (every ``POLL_SECONDS``): whether the child
        is runnable, for ``own_seconds``."""
        if self.cpu_at_start is not None:
            self.polls += 1
            self.runnable_polls += self.child.runnable()

    def own_seconds(self, used: float | None = None) -> float:
        """What the wait charges the exercise's budget: the child's CPU time plus the share of the wait it
        spent asleep or blocked (sampled), never the time it waited for a CPU the machine gave to others;
        at least a ``STARVED_STRETCH``-th of the wall time, so a budget bounds the clock too (4 x 120 s
        at most), and the wall time where no CPU figure can be read. ``used``: the child's CPU figure,
        when the caller has just read it."""
        elapsed = time.monotonic() - self.start
        used = self._cpu() if used is None else used
        if used is None or self.cpu_at_start is None:
            return elapsed
        asleep = elapsed * (1 - self.runnable_polls / self.polls) if self.polls else 0.0
        return min(elapsed, max(elapsed / STARVED_STRETCH, used - self.cpu_at_start + asleep))

    def stretch_note(self) -> str:
        """What a timeout message adds when the machine's load stretched the wait."""
        if not self.stretched:
            return ""
        return f" ({time.monotonic() - self.start:.0f} s on the clock: the machine was busy)"


def reader(deadline: CallClock, process):
    """A ``read(fd, n)`` for ``wire.read_frame`` that waits for data until ``deadline``
    (then :class:`Deadline`), and raises EOFError once ``process`` (anything with ``poll()``)
    has exited, though a process it forked may still hold the pipe open."""
    def read(fd, n):
        while True:
            remaining = deadline.remaining()  # data already there is read, even past the deadline
            if select.select([fd], [], [], max(0.0, min(remaining, POLL_SECONDS)))[0]:
                return os.read(fd, n)
            if remaining <= 0:
                raise Deadline
            deadline.sample()  # nothing to read yet: the child is still at work, asleep or starved
            if process.poll() is not None:
                raise EOFError("the process exited")
    return read


def write_all(fd: int, data, deadline: CallClock):
    """Write a whole message (bytes, or the buffers of :func:`wire.frame_parts` in turn) to a
    non-blocking ``fd``, but never wait past ``deadline`` (then :class:`Deadline`) for a reader
    that stops reading."""
    for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
        view = memoryview(part)
        while view:
            remaining = deadline.remaining()  # room already there is used, even past the deadline
            if not select.select([], [fd], [], max(0.0, remaining))[1]:
                if remaining <= 0:
                    raise Deadline
                continue
            try:
                view = view[os.write(fd, view[:1 << 16]):]
            except BlockingIOError:
                continue


def _shift(tree, offset):
    if isinstance(tree, list):
        return [_shift(v, offset) for v in tree]
    if isinstance(tree, dict):
        if "$nd" in tree:
            return dict(tree, **{"$nd": tree["$nd"] + offset})
        return {k: _shift(v, offset) for k, v in tree.items()}
    return tree


# -- memory, measured by the grader ----------------------------------------------------------


class _GroupMeter:
    """The kernel's peak for the child's cgroup, all its processes included: the whole footprint."""

    def __init__(self, group):
        self.group, self.ready, self.before = group, False, None

    def begin(self):
        self.ready = self.group.reset_peak()  # v1: the peak restarts from the usage now
        self.before = self.group.usage() if self.ready else None

    def result(self):
        peak = self.group.peak() if self.ready else None
        return (peak, "cgroup", self.before) if peak is not None else (None, None, None)


class _HwmMeter:
    """Where no cgroup can be had: the Python process's own high-water mark (VmHWM), reset to
    its resident size before the call (clear_refs); it misses what forked processes use."""

    def __init__(self, pid: int):
        self.pid, self.ready, self.before = _python_pid(pid), False, None

    def begin(self):
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # resets VmHWM to VmRSS
            self.ready = True
        except OSError:
            self.ready = False
        rss = _status_kib(self.pid, "VmRSS") if self.ready else None
        self.before = rss * 1024 if rss is not None else None

    def result(self):
        peak = _status_kib(self.pid, "VmHWM") if self.ready else None
        return (peak * 1024, "vmhwm", self.before) if peak is not None else (None, None, None)


def _meter(child: Child):
    if child.group is not None and child.group.can_reset_peak:
        return _GroupMeter(child.group)
    return _HwmMeter(child.pid)


def _status_kib(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _python_pid(pid: int) -> int:
    """The Python process itself: under bubblewrap, ``pid`` is bwrap's, two levels up."""
    python = os.path.realpath(sys.executable)
    for _ in range(4):
        try:
            if os.path.realpath(f"/proc/{pid}/exe") == python:
                return pid
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return pid
        if not children:
            return pid
        pid = int(children[0])
    return pid
