"""Evidence the kernel measures: memory and warnings of one call (:func:`measure`, the one place),
most of three readings for a must-not, and the child's CPU time."""
from __future__ import annotations

import numpy as np

from ..sandbox import CandidateCrashed, CandidateRaised
from ..sandbox.wire import HELD_BYTES
from .run import ExerciseRun, fail


def measure(ex: ExerciseRun, target, name: str, *args, memory: bool = True, on_state: bool = False, **kwargs):
    """(value, bytes over the budget's base or None, reported warnings) of ``target.name(*args, **kwargs)``.

    The one place a check takes memory and warnings. The call is an ordinary call (nothing tells
    the child it is measured) and its value is returned for the check to compare like any other.
    Memory is the kernel's figure for the child's whole footprint over the whole request
    (``target.measured``: a cgroup's peak, or the child's own high-water mark where no cgroup can
    be had), memory held since import included. The figure returned is what is left of that peak
    after the base every answer may use: a kit-only child's footprint measured in the same run
    (``Sandbox.floor_bytes``), the arguments as received and as float64 copies (a cast or a defensive
    copy of its inputs is no forbidden array), twice the answer's own size, and the
    results the child holds for the ownership probes (``wire.HELD_BYTES``). A call
    on state (``on_state``) is judged on what it added over the footprint the kernel saw as the
    request was written: what the cache held before is its storage, however large (a cache
    preallocated for 4,096 positions, as Hugging Face's static cache is, is no per-step copy; a red
    team's was graded one when held memory counted). A cache that frees spare memory during a call,
    or copies into room it holds, can hide a copy there: a limit the README states.
    Checks compare the figure with what their must-not would cost. ``memory=False`` takes the warnings only
    (``target.with_stats``). None means nothing could be measured, never "fine". Warnings are what
    the child reports: they may count against a candidate, never for one. A call that runs out of
    memory is a broken must-not (the allocation was too large), not a crash.
    """
    if memory and not getattr(ex, "measures_memory", True):  # a kit mistake: no floor launched, no collection made
        raise RuntimeError(f"measure({name}) with memory in a checks module that says MEASURES_MEMORY = False")
    try:
        if memory:
            value, stats = target.measured(name, *args, **kwargs)
        else:
            value, stats = target.with_stats(name, *args, **kwargs)
    except CandidateRaised as exc:
        if memory and exc.is_a("MemoryError"):
            fail(f"{name} ran out of memory ({exc.message[:80]})", kind="must_not")
        raise
    except CandidateCrashed as exc:
        if not memory:
            raise
        fail(f"{name} killed its process ({str(exc)[:120]}), as when it passes the memory limit",
             kind="must_not")
    given = (args, kwargs)
    allowed = _data_bytes(given) + _data_bytes(given, widened=True) + 2 * _data_bytes(value)
    over = _over_base(ex, stats, allowed, on_state) if memory else None
    return value, over, list(stats.warnings)


def middle_reading(limit: float, reading, times: int = 3) -> tuple | None:
    """A must-not's middle reading: ``(figure, detail)`` of the middle of up to ``times`` readings, or None
    when nothing was measured. ``reading()`` makes one measured call (:func:`measure`), whose answer is judged
    like any other, and returns ``(figure, detail)`` (the detail, such as the case, names the call in a
    failure) or None. Readings stop once most of them fall on one side of ``limit``: the rest could not move
    the middle across it.

    Why never one reading, nor the least of two: a stray charge (the kernel counts the whole cgroup) once
    read a correct answer over its bound, so one high figure cannot fail; and an answer that builds the
    forbidden array on every call but the few it can tell apart (its process's first, or one repeating the
    call before) must not pass on those. So ``reading`` draws fresh shapes and values every time (a repeat is
    a call an answer can recognise), and an answer fails when most of its readings reach the bound. A reading
    may return a figure scaled to its own shapes, judged against the same ``limit``."""
    readings, most = [], times // 2 + 1
    for _ in range(times):
        read = reading()
        if read is not None:
            readings.append(read)
        if max(sum(f >= limit for f, _ in readings), sum(f < limit for f, _ in readings)) >= most:
            break
    return sorted(readings, key=lambda r: r[0])[(len(readings) - 1) // 2] if readings else None


def _over_base(ex, stats, data: int, on_state: bool) -> int | None:
    if on_state:  # what the call added to the footprint it began with
        if None in (stats.peak_bytes, stats.before_bytes):
            return None
        return max(0, stats.peak_bytes - stats.before_bytes - data)
    floor = ex.sandbox.floor_bytes() if stats.peak_bytes is not None else None
    return None if floor is None else max(0, stats.peak_bytes - floor - data - HELD_BYTES)


def _data_bytes(value, widened: bool = False) -> int:
    """The bytes of the arrays in ``value``; ``widened``: of copies of them at 8 bytes an element."""
    if isinstance(value, np.ndarray):
        return value.size * max(8, value.itemsize) if widened else value.nbytes
    if isinstance(value, (list, tuple)):
        return sum(_data_bytes(v, widened) for v in value)
    if isinstance(value, dict):
        return sum(_data_bytes(v, widened) for v in value.values())
    return 0


def child_cpu_seconds(ex: ExerciseRun) -> tuple[int, float] | None:
    """(the child's pid, the CPU time it and every process it started have used so far), or None where
    it cannot be read. The kernel's count (``launch.tree_cpu_seconds``), which candidate code cannot
    rewrite and load does not inflate as it does wall time (a waiting process accrues none); read from
    /proc it moves in clock ticks (10 ms), so a check times work of tens of milliseconds at least."""
    try:
        child = ex.sandbox.worker.child
        return child.pid, child.cpu_seconds()
    except (AttributeError, OSError, ValueError, IndexError):
        return None


class ChildCpu:
    """A meter of the child's CPU time from the moment it is made: ``used()`` is the seconds since, or
    None where either reading failed or the child was replaced in between."""

    def __init__(self, ex: ExerciseRun):
        self.ex, self.start = ex, child_cpu_seconds(ex)

    def used(self) -> float | None:
        now = child_cpu_seconds(self.ex)
        if self.start is None or now is None or now[0] != self.start[0]:
            return None
        return now[1] - self.start[1]


def cpu_of(ex: ExerciseRun, calls) -> float | None:
    """CPU seconds the child spent on ``calls()`` (None if unreadable, or if the child was replaced)."""
    meter = ChildCpu(ex)
    calls()
    return meter.used()
