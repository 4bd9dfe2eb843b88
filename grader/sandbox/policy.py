"""The sandbox policy as one declarative value, as nsjail's ``config.proto`` is: every limit,
mount and environment variable a child gets is a field of :class:`Policy`, with its unit and
default. The rest of the sandbox only derives from it:

- :meth:`Policy.bwrap_args`: bubblewrap's command line, mount by mount, from ``mounts``;
- :meth:`Policy.rlimits`: the per-process resource limits set between fork and exec;
- :meth:`Policy.cgroup_limits`: the memory and process limits of the child's control group;
- :meth:`Policy.environment_for`: the child's whole environment (nothing of the grader's);
- :meth:`Policy.bounds`: what the result and every report say held.

``Limits`` is the same class under its older name (callers tune the numbers with it).
"""
from __future__ import annotations

import functools
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

LEVELS = ("bwrap", "uid", "process")  # strongest first
NOT_ISOLATED = "not isolated: grade only code you trust"
GET_BUBBLEWRAP = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
                  "it needs Linux), or pass --trust-submissions to grade code you trust without isolation")
MiB = 1 << 20
_GRADER_PACKAGE = Path(__file__).resolve().parent.parent
_KIT_ROOT = _GRADER_PACKAGE.parent
# The interpreter every child runs, resolved once: its folder without ".." or links (the child
# sees only resolved paths), its file name as given (a venv's python is a link, and its name is
# how Python finds the venv).
PYTHON = os.path.join(os.path.realpath(os.path.dirname(sys.executable)), os.path.basename(sys.executable))



# The seed every child's generators start from, whatever the grading seed. Any function of the
# grading seed alone can be inverted by trying seeds (an interviewer's 7 is found at once, red team
# 10), and with the grading seed a child rebuilds every check's inputs; a constant tells it nothing
# and still replays exactly.
CHILD_SEED = 0x6B7667726164650A


class IsolationError(ValueError):
    """An isolation level that does not exist or does not work was asked for; a usage error."""


@dataclass(frozen=True)
class Mount:
    """One entry of the child's file system under bubblewrap, made in the order listed.

    ``kind``: ``ro-bind`` (the host's path, read-only), ``system-dir`` (read-only, or the same
    symbolic link where the host's is one, as /bin -> usr/bin), ``tmpfs`` (an empty memory file
    system, writable by the child, of ``size`` bytes), ``proc``, ``dev``; and three filled in at
    launch: ``python`` (the interpreter's installation and numpy's and pytest's homes, read-only),
    ``hide-kit`` (the kit's hidden folders, where a bound root holds them, under an empty tmpfs)
    and ``scratch`` (the child's working folder: a tmpfs of ``size`` bytes, the grader's files
    in it read-only, its report files writable).
    """

    path: str  # where it appears in the child
    kind: str
    required: bool = True  # False: left out where the host has no such path (bwrap's --ro-bind-try)
    size: str | None = None  # tmpfs and scratch: the Policy field holding the size cap, in bytes

    @property
    def writable(self) -> bool:
        return self.kind in ("tmpfs", "scratch")


SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime")

MOUNTS = (
    Mount("/usr", "ro-bind"),
    *(Mount(f"/{name}", "system-dir", required=False) for name in SYSTEM_DIRS),
    *(Mount(path, "ro-bind", required=False) for path in ETC_FILES),
    # /tmp before the binds below: a venv or scratch folder under /tmp shows through it.
    Mount("/tmp", "tmpfs", size="tmp_bytes"),
    Mount("<python>", "python"),
    Mount("<kit>", "hide-kit"),
    Mount("<scratch>", "scratch", size="scratch_bytes"),
    Mount("/proc", "proc"),
    Mount("/dev", "dev"),
    # bubblewrap's --dev makes /dev/shm an unsized tmpfs: a sized one goes over it.
    Mount("/dev/shm", "tmpfs", size="shm_bytes"),
)

ENVIRONMENT = (  # the child's environment, besides HOME/TMPDIR (its scratch), the seed and its marker
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("LANG", "C.UTF-8"),
    ("PYTHONHASHSEED", "0"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONNOUSERSITE", "1"),
    ("OPENBLAS_NUM_THREADS", "1"),
    ("OMP_NUM_THREADS", "1"),
    ("MKL_NUM_THREADS", "1"),
    # A candidate's own tests run under pytest alone: plugins installed beside the kit are no part
    # of the contract, and importing them (hypothesis's alone) cost about a second per run.
    ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1"),
    # A fixed mmap threshold (setting it turns glibc's adaptive one off): every large array is
    # its own mapping, returned on free, so the cgroup's peak sees each allocation instead of
    # reused heap that was charged once, steps ago.
    ("MALLOC_MMAP_THRESHOLD_", str(256 << 10)),
)
PASSED_THROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # some machines need these for OpenBLAS; no secrets


@dataclass(frozen=True)
class Policy:
    """What one child may use and see. Seconds are wall clock unless said otherwise."""

    call_seconds: float = 10.0  # one call into candidate code (a deadline, never a verdict; worker.CallClock)
    load_seconds: float = 20.0  # importing the candidate module
    exercise_seconds: float = 120.0  # one exercise's candidate code in all: import, calls, own tests
    max_faults: int = 2  # timeouts or crashes before an exercise stops calling the candidate
    memory_bytes: int = 2 << 30  # address space per process (RLIMIT_AS); with a cgroup, for all it forks
    processes: int = 64  # processes and threads of a child and all it starts (cgroup, or RLIMIT_NPROC at uid)
    output_bytes: int = 8 * MiB  # stdout+stderr kept per child (the rest is dropped); also per file written
    cpu_seconds: int = 300  # CPU time per process (RLIMIT_CPU); SIGKILL 5 s later
    open_files: int = 256  # descriptors per process (RLIMIT_NOFILE)
    scratch_bytes: int = 64 * MiB  # the child's working folder under bubblewrap (a sized tmpfs)
    tmp_bytes: int = 64 * MiB  # its private /tmp under bubblewrap
    shm_bytes: int = 8 * MiB  # its private /dev/shm under bubblewrap (POSIX shared memory, semaphores)
    isolation: str | None = None  # a level of LEVELS; None: the strongest available (or $KVGRADE_ISOLATION)
    mounts: tuple[Mount, ...] = MOUNTS  # the file system under bubblewrap, in order
    environment: tuple[tuple[str, str], ...] = ENVIRONMENT  # fixed variables of every child
    passed_through: tuple[str, ...] = PASSED_THROUGH  # the grader's variables copied when set

    # -- derived: resource limits, cgroup, environment -------------------------------------------
    def rlimits(self, level: str) -> list[tuple[int, int, int]]:
        """``(resource, soft, hard)`` for each rlimit a child gets at ``level``."""
        limits = [(resource.RLIMIT_AS, self.memory_bytes, self.memory_bytes),
                  (resource.RLIMIT_FSIZE, self.output_bytes, self.output_bytes),
                  (resource.RLIMIT_CORE, 0, 0),
                  (resource.RLIMIT_NOFILE, self.open_files, self.open_files),
                  (resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 5)]
        if level == "uid":  # a uid of its own: the process count is the child's alone
            limits.append((resource.RLIMIT_NPROC, self.processes, self.processes))
        return limits

    def cgroup_limits(self) -> tuple[int, int]:
        """(memory in bytes, processes) for the child's control group, forks included."""
        return self.memory_bytes, self.processes

    def environment_for(self, home: Path, marker: str = "", site: Path | None = None,
                        marker_name: str = "KVGRADE_SANDBOX") -> dict:
        """The child's whole environment: built from nothing, so no variable of the grader's leaks."""
        env = dict(self.environment) | {"HOME": str(home), "TMPDIR": str(home), "KVGRADE_SEED": str(CHILD_SEED)}
        if site is not None:  # where sitecustomize.py seeds the generators
            env["PYTHONPATH"] = str(site)
        env |= {key: os.environ[key] for key in self.passed_through if key in os.environ}
        if marker:
            env[marker_name] = marker
        return env

    # -- derived: bubblewrap ---------------------------------------------------------------------
    def bwrap_args(self, scratch) -> list[str]:
        """The bubblewrap command line that runs a child over ``scratch`` (a ``launch.Scratch``)."""
        args = [shutil.which("bwrap") or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL"]
        binds: list[str] = []
        for mount in self.mounts:
            args += self._mount_args(mount, scratch, binds)
        return args + ["--remount-ro", "/", "--chdir", str(scratch.work), "--"]

    def _mount_args(self, mount: Mount, scratch, binds: list[str]) -> list[str]:
        path, kind = mount.path, mount.kind
        if kind == "ro-bind":
            binds.append(path)
            return ["--ro-bind" if mount.required else "--ro-bind-try", path, path]
        if kind == "system-dir":
            host = Path(path)
            if host.is_symlink():
                return ["--symlink", os.readlink(host), path]
            return ["--ro-bind", path, path] if host.is_dir() or mount.required else []
        if kind == "tmpfs":
            return _sized(getattr(self, mount.size)) + ["--tmpfs", path]
        if kind in ("proc", "dev"):
            return [f"--{kind}", path]
        if kind == "python":
            return _python_binds(binds)
        if kind == "hide-kit":
            return [a for secret in _kit_secrets(binds) for a in ("--tmpfs", secret)]
        if kind == "scratch":
            return _scratch_mounts(scratch, getattr(self, mount.size))
        raise ValueError(f"unknown mount kind {kind!r}")

    def writable(self) -> dict[str, int]:
        """Where a bubblewrap child can write, and how many bytes each place holds."""
        return {("scratch" if m.kind == "scratch" else m.path): getattr(self, m.size)
                for m in self.mounts if m.writable}

    # -- derived: what held, for the result ------------------------------------------------------
    def bounds(self, level: str, cgroups: bool, cgroup_cpu: bool = False) -> dict:
        """Which bounds hold for children at ``level`` (``cgroups``: this machine gives us groups;
        ``cgroup_cpu``: they keep a CPU-time figure, which the work checks then read)."""
        sized = level == "bwrap" and _bwrap_has("--size")
        return {
            "level": level,
            "memory": "cgroup" if cgroups else "rlimit",
            "pids": "cgroup" if cgroups else ("rlimit" if level == "uid" else "none"),
            "cpu_time": "cgroup" if cgroups and cgroup_cpu else "process tree",
            "scratch": "tmpfs" if sized else "disk",
            "root": "read-only" if level == "bwrap" else "host",
            "network": "none" if level == "bwrap" else ("own namespace, best effort" if level == "uid" else "host"),
            "warning": NOT_ISOLATED if level == "process" else None,
            "memory_bytes": self.memory_bytes,
            "processes": self.processes if cgroups or level == "uid" else None,
            "writable_bytes": self.writable() if sized else None,
        }


Limits = Policy  # the name callers know it by


def _python_roots() -> list[str]:
    """Directories the child's Python needs to read: the installation and numpy/pytest's homes."""
    return list(_found_python_roots())


@functools.cache
def _found_python_roots() -> tuple[str, ...]:
    """``_python_roots``, found once per process (about 6 ms of lookups and realpaths that every
    child's launch paid again: the installation does not move while the grader runs)."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(PYTHON))))
    roots.add(os.path.dirname(os.path.dirname(PYTHON)))
    for name in ("numpy", "pytest", "_pytest", "pluggy", "iniconfig", "packaging"):
        spec = importlib.util.find_spec(name)
        if spec and spec.origin:
            origin = Path(spec.origin).resolve()
            roots.add(str(origin.parent.parent if origin.name == "__init__.py" else origin.parent))
    roots = sorted(r for r in roots if r != "/" and os.path.isdir(r))
    kept = []  # only the outermost of nested roots
    for r in roots:
        if not any(r == k or r.startswith(k + "/") for k in kept):
            kept.append(r)
    return tuple(kept)


def _inside(path: str, binds: list[str]) -> bool:
    return any(path == b or path.startswith(b + "/") for b in binds)


def _python_binds(binds: list[str]) -> list[str]:
    args = []
    for root in _python_roots():
        if not _inside(root, binds):
            args += ["--ro-bind", root, root]
            binds.append(root)
    return args


def _kit_secrets(binds: list[str]) -> list[str]:
    """The kit's folders that a bound root holds (installed into site-packages, say), each
    hidden on its own: the kit's root may then be site-packages itself."""
    secrets = (_GRADER_PACKAGE, _KIT_ROOT / "solutions", _KIT_ROOT / "rubrics")
    return [str(s) for s in secrets if s.is_dir() and any(str(s).startswith(b + "/") for b in binds)]


def _scratch_mounts(scratch, size: int) -> list[str]:
    """Scratch is a size-capped memory file system; what the grader prepared is bound into it
    read-only, and the files a child reports into (``scratch.reports``) writable, one by one, so
    the child can fill them but never replace them with a link or a FIFO."""
    root = scratch.root
    args = _sized(size) + ["--tmpfs", str(root)]
    for entry in sorted(root.iterdir()):
        if entry == scratch.work:
            args += ["--dir", str(entry)]
            args += [a for f in sorted(entry.iterdir()) for a in ("--ro-bind", str(f), str(f))]
        elif entry.name in scratch.reports:
            args += ["--bind", str(entry), str(entry)]
        else:
            args += ["--ro-bind", str(entry), str(entry)]
    return args


def _sized(size: int) -> list[str]:
    return ["--size", str(size)] if _bwrap_has("--size") else []


@functools.cache
def _bwrap_has(option: str) -> bool:
    try:
        out = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr
