"""A control group per child: a memory limit and a process limit that cover every process it
forks, and a peak-memory figure and a CPU-time figure the kernel keeps, where candidate code cannot
rewrite them. The CPU figure counts every process that ever ran in the group, however it ended:
a child reaped by nobody (its parent ignoring SIGCHLD) never reaches any parent's ``cutime``.

cgroup v1 (separate ``memory`` and ``pids`` hierarchies, as on this machine type) and v2 (one
unified hierarchy) are both used when writable; otherwise :func:`create` returns None and the
caller falls back to per-process rlimits and ``VmHWM`` (and says so in its isolation report).
Groups are made under the grader's own group, so the machine's limits on the grader still apply.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str | None:
    """The grader's own group in ``controller``'s hierarchy ("" names the v2 hierarchy)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        v2 = controller == "" and names == "" and line.startswith("0:")
        if v2 or (controller and controller in names.split(",")):
            return path
    return None


def _writable_dir(parent: Path, probe: str) -> bool:
    return (parent / probe).exists() and os.access(parent, os.W_OK)


class Group:
    """One child's groups: ``dirs`` to join and remove, and how to read and reset its memory."""

    def __init__(self, dirs: list[Path], memory_dir: Path | None, version: int, pids: bool,
                 cpu_dir: Path | None = None):
        self.dirs, self.memory_dir, self.version, self.limits_pids = dirs, memory_dir, version, pids
        self.cpu_dir = cpu_dir

    # -- joining: runs in the child between fork and exec (no allocation-heavy work) ---------
    def join(self):
        pid = str(os.getpid()).encode()
        for folder in self.dirs:
            fd = os.open(folder / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    # -- memory --------------------------------------------------------------------------------
    def usage(self) -> int | None:
        return _read_int(self.memory_dir / ("memory.usage_in_bytes" if self.version == 1 else "memory.current"))

    @property
    def can_reset_peak(self) -> bool:
        """v1 resets the peak for every reader; v2 (``memory.peak``) only per open descriptor,
        and only on recent kernels, so per-call peaks are read from v1 alone."""
        return self.version == 1

    def reset_peak(self) -> bool:
        """Start a new peak from the current usage."""
        return _write(self.memory_dir / "memory.max_usage_in_bytes", "0")

    def peak(self) -> int | None:
        return _read_int(self.memory_dir / "memory.max_usage_in_bytes")

    def reached_memory_limit(self) -> bool:
        """The kernel refused the group memory at its limit at least once (v1 ``failcnt``, v2
        ``memory.events``' max and oom_kill counts)."""
        if self.version == 1:
            return (_read_int(self.memory_dir / "memory.failcnt") or 0) > 0
        try:
            events = dict(line.split() for line in (self.memory_dir / "memory.events").read_text().splitlines())
        except (OSError, ValueError):
            return False
        return any(events.get(key, "0") != "0" for key in ("max", "oom_kill"))

    # -- CPU time ------------------------------------------------------------------------------
    def cpu_seconds(self) -> float | None:
        """CPU time every process of the group has used, living or gone (v1 ``cpuacct.usage``, v2
        ``cpu.stat``'s ``usage_usec``); None where this machine keeps no such figure for it."""
        if self.cpu_dir is None:
            return None
        if self.version == 1:
            nanoseconds = _read_int(self.cpu_dir / "cpuacct.usage")
            return None if nanoseconds is None else nanoseconds / 1e9
        try:
            stat = dict(line.split() for line in (self.cpu_dir / "cpu.stat").read_text().splitlines())
            return int(stat["usage_usec"]) / 1e6
        except (OSError, ValueError, KeyError):
            return None

    def pids(self) -> list[int]:
        """Every process in the group, however it detached."""
        return sorted({pid for folder in self.dirs for pid in _pids(folder)})

    # -- the end -------------------------------------------------------------------------------
    def kill_all(self) -> int:
        """SIGKILL every process still in the group, however it detached; returns how many."""
        killed = 0
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        return killed

    def remove(self, deadline_seconds: float = 2.0):
        """Kill what is left and remove the groups (a group empties a moment after its last kill)."""
        deadline = time.monotonic() + deadline_seconds
        for folder in self.dirs:
            while True:
                self.kill_all()
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break  # left for the machine; it holds no process we could kill
                    time.sleep(0.01)


def _pids(folder: Path) -> list[int]:
    try:
        return [int(p) for p in (folder / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


def _make(parent: Path, name: str, settings: dict, optional: dict | None = None) -> Path | None:
    """A new group with every one of ``settings`` written (else None); ``optional`` where it can be."""
    folder = parent / name
    try:
        folder.mkdir()
    except OSError:
        return None
    if not all(_write(folder / key, str(value)) for key, value in settings.items()):
        os.rmdir(folder)
        return None
    for key, value in (optional or {}).items():  # swap accounting is often switched off
        _write(folder / key, str(value))
    return folder


def create(memory_bytes: int, max_pids: int) -> Group | None:
    """A fresh group with these limits, or None where this machine gives us none."""
    if os.environ.get("KVGRADE_CGROUPS") == "off":  # to exercise the fallback (tests) or opt out
        return None
    name = f"kvgrade-{uuid.uuid4().hex[:12]}"
    v2 = _own_path("")
    if (ROOT / "cgroup.controllers").exists() and v2 is not None:
        return _create_v2(ROOT / v2.lstrip("/"), name, memory_bytes, max_pids)
    return _create_v1(name, memory_bytes, max_pids)


def _create_v1(name: str, memory_bytes: int, max_pids: int) -> Group | None:
    own = _own_path("memory")
    parent = ROOT / "memory" / (own or "/").lstrip("/")
    if own is None or not _writable_dir(parent, "memory.limit_in_bytes"):
        return None
    memory = _make(parent, name, {"memory.limit_in_bytes": memory_bytes},
                   {"memory.memsw.limit_in_bytes": memory_bytes, "memory.swappiness": 0})
    if memory is None:
        return None
    dirs, own_pids = [memory], _own_path("pids")
    pids_parent = ROOT / "pids" / (own_pids or "/").lstrip("/")
    pids = _make(pids_parent, name, {"pids.max": max_pids}) if own_pids is not None and _writable_dir(
        pids_parent, "cgroup.procs") else None
    if pids is not None:
        dirs.append(pids)
    own_cpu = _own_path("cpuacct")  # alone, or mounted with cpu ("cpu,cpuacct")
    cpu_parent = _v1_hierarchy("cpuacct", own_cpu)
    cpu = _make(cpu_parent, name, {}) if cpu_parent is not None and _writable_dir(
        cpu_parent, "cpuacct.usage") else None
    if cpu is not None:
        dirs.append(cpu)
    return Group(dirs, memory, 1, pids is not None, cpu)


def _v1_hierarchy(controller: str, own: str | None) -> Path | None:
    """The grader's own group in the v1 hierarchy that holds ``controller``, however it is mounted."""
    if own is None:
        return None
    for mount in (controller, "cpu,cpuacct", "cpuacct,cpu"):
        if (ROOT / mount).is_dir():
            return ROOT / mount / own.lstrip("/")
    return None


def _create_v2(parent: Path, name: str, memory_bytes: int, max_pids: int) -> Group | None:
    if not _writable_dir(parent, "cgroup.subtree_control"):
        return None
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    if "memory" not in enabled:
        return None
    limits = {"memory.max": memory_bytes} | ({"pids.max": max_pids} if "pids" in enabled else {})
    folder = _make(parent, name, limits, {"memory.swap.max": 0})
    if folder is None:
        return None
    cpu = folder if (folder / "cpu.stat").exists() else None  # kept for every v2 group
    return Group([folder], folder, 2, "pids" in enabled, cpu)
