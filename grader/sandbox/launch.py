"""Starting a child process for candidate code: scratch directory, scrubbed environment, limits,
a control group, and the strongest OS isolation this machine offers (see ``isolation.py``).

Everything that decides *how* a child runs lives here, so the candidate-module worker and the
candidate-tests runner share one policy:

- ``python -s -P -B``: no user site, no script folder on ``sys.path``, no ``__pycache__``
  written. (Not ``-I``: it implies ``-E``, which would ignore the ``PYTHONHASHSEED`` we set.)
  The environment is built from nothing, so no variable of the grader's reaches the child.
- ``sitecustomize`` seeds Python's ``random`` and numpy's global generator from the grading
  seed, in every child (own-test children too), so a run replays whatever the candidate draws.
- stdout and stderr go to a pipe the grader drains: output past the cap is dropped, the
  child's writes never fail because of it, and nothing the child can reach is reopened.
"""
from __future__ import annotations

import ctypes
import os
import resource
import secrets
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from . import cgroup
from .isolation import LEVELS, IsolationError, bwrap_prefix, isolation_level  # noqa: F401  (re-exported)

RUNTIME_DIR = "kvgrade-runtime"  # child.py and wire.py are copied here; also a traceback filter
SITE_DIR = "kvgrade-site"  # sitecustomize.py, which seeds every child's generators
MARKER = "KVGRADE_SANDBOX"  # per-child token in the environment, to find escaped processes
REPORT_FILES = ("junit.xml",)  # files a child reports into: pre-created, writable, never replaceable
MAX_COPY_BYTES = 4 << 20  # a file copied into scratch (kit helpers are far smaller)
TAIL_BYTES = 64 << 10  # the end of a child's output kept for messages
_HERE = Path(__file__).resolve().parent
_UID_RANGE = (1_800_000_000, 1_900_000_000)  # fresh uids for the "uid" level; no passwd entry needed

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


@dataclass(frozen=True)
class Limits:
    """What one child may use. Times are wall-clock seconds."""

    call_seconds: float = 10.0  # one call into candidate code
    load_seconds: float = 20.0  # importing the candidate module
    memory_bytes: int = 2 << 30  # per process (RLIMIT_AS) and, with a cgroup, for all it forks
    output_bytes: int = 8 << 20  # stdout/stderr kept per child (the rest is dropped); also per file written
    scratch_bytes: int = 64 << 20  # the writable scratch folder under bubblewrap (a sized tmpfs)
    cpu_seconds: int = 300
    open_files: int = 256
    processes: int = 0  # processes and threads of a child and all it starts (0: 64)
    max_faults: int = 2  # timeouts or crashes before an exercise stops calling the candidate
    exercise_seconds: float = 120.0  # one exercise's candidate code: import, calls, own tests
    isolation: str | None = None  # None: the strongest available (or $KVGRADE_ISOLATION)

    @property
    def max_processes(self) -> int:
        return self.processes or 64


def scrubbed_env(home: Path, marker: str = "", seed: int = 0, site: Path | None = None) -> dict:
    """Only what Python and a single-threaded BLAS need; nothing of the grader's environment."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "KVGRADE_SEED": str(int(seed)),
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    if site is not None:  # where sitecustomize.py seeds the generators
        env["PYTHONPATH"] = str(site)
    # Some machines need these to keep OpenBLAS from crashing; they carry no secrets.
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if key in os.environ:
            env[key] = os.environ[key]
    if marker:
        env[MARKER] = marker
    return env


def _unshare_network():
    """Best effort, for the "uid" level: a network namespace of its own has no interfaces."""
    if _libc is not None:
        _libc.unshare(0x40000000)  # CLONE_NEWNET; failure leaves the network reachable


def _no_new_privs():
    if _libc is not None:
        _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid binaries cannot raise privileges


def _preexec(limits: Limits, level: str, uid: int | None, group: cgroup.Group | None):
    def preexec():
        if group is not None:
            group.join()  # first: everything below, and every fork, is counted
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        if level == "uid":
            _unshare_network()
            resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if level != "bwrap":  # bwrap would refuse to start; it drops capabilities itself
            _no_new_privs()

    return preexec


class NotPlain(OSError):
    """A file that is not a regular file of at most the size read; ``str()`` says why."""


class Oversized(NotPlain):
    pass


def read_descriptor(fd: int, name: str, cap: int, single_link: bool = False) -> bytes:
    """Up to ``cap`` bytes of the regular file open on ``fd`` (closed here); NotPlain if it is
    anything else, larger, or (``single_link``) a hard link that may share its bytes with a
    file elsewhere."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPlain(f"{name} is not a regular file")
        if single_link and info.st_nlink > 1:
            raise NotPlain(f"{name} is a hard link")
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise Oversized(f"{name} is over {cap // 1024:,} KiB")
    return data


def read_plain_file(path: Path, cap: int = MAX_COPY_BYTES) -> bytes:
    """The bytes of a regular file, from a descriptor opened without following a link or
    waiting on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    return read_descriptor(fd, Path(path).name, cap)


class Output:
    """Drains a child's stdout and stderr from a pipe: keeps the last ``TAIL_BYTES`` and counts
    the rest. The child never waits on us for long and never sees a write fail."""

    def __init__(self, fd: int, cap: int):
        self.fd, self.cap, self.total = fd, cap, 0
        self._tail, self._stop = b"", threading.Event()
        self._thread = threading.Thread(target=self._drain, name="kvgrade-output", daemon=True)
        self._thread.start()

    def _drain(self):
        try:
            while True:
                if not select.select([self.fd], [], [], 0.2)[0]:
                    if self._stop.is_set():
                        return
                    continue
                data = os.read(self.fd, 1 << 16)
                if not data:
                    return
                self.total += len(data)
                self._tail = (self._tail + data)[-TAIL_BYTES:]
        finally:
            os.close(self.fd)

    @property
    def truncated(self) -> bool:
        return self.total > self.cap

    def tail(self, limit: int = 300) -> str:
        return self._tail[-limit:].decode("utf-8", "replace").strip()

    def close(self, wait: float = 1.0):
        """Stop once the pipe is quiet (every writer gone, or nothing more within ``wait``)."""
        self._stop.set()
        self._thread.join(wait)


class Scratch:
    """A private directory for one child: runtime files, kit helpers, candidate files, cwd.

    Nothing the grader reads back lies where the child can replace it: output comes through a
    pipe (:class:`Output`), and the ``REPORT_FILES`` are read with :meth:`read_private`.
    """

    def __init__(self, prefix: str = "kvgrade-"):
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        os.chmod(self.root, 0o755)  # traversable by a "uid" child; writable by the grader only
        self.work = self.root / "work"
        self.work.mkdir()
        self.output: Output | None = None
        self.reports = {}
        for name in REPORT_FILES:
            fd = os.open(self.root / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            self.reports[name] = os.fstat(fd).st_ino
            os.close(fd)

    def add_runtime(self) -> Path:
        runtime = self.root / RUNTIME_DIR
        runtime.mkdir(exist_ok=True)
        for name in ("child.py", "wire.py"):
            shutil.copyfile(_HERE / name, runtime / name)
        return runtime / "child.py"

    def add_site(self) -> Path:
        """The folder put on the child's PYTHONPATH: a ``sitecustomize.py`` that seeds it."""
        site = self.root / SITE_DIR
        site.mkdir(exist_ok=True)
        shutil.copyfile(_HERE / "seeding.py", site / "sitecustomize.py")
        return site

    def add_files(self, folder: str, files) -> Path:
        """Copy ``files`` into ``folder``: paths, (name, path) or (name, bytes) pairs; later ones win.

        A path is opened without following a link and must be a regular file of at most
        ``MAX_COPY_BYTES`` (OSError otherwise): candidate files may be given by path too.
        """
        target = self.root / folder
        target.mkdir(exist_ok=True)
        for item in files:
            name, source = item if isinstance(item, tuple) else (Path(item).name, item)
            data = source if isinstance(source, bytes) else read_plain_file(Path(source))
            (target / name).write_bytes(data)
        return target

    def read_private(self, name: str, cap: int = 1 << 20) -> bytes:
        """Up to ``cap`` bytes of a report file the child wrote (e.g. ``junit.xml``), from the
        very file the grader created: b"" if it was replaced or is not a regular file."""
        try:
            fd = os.open(self.root / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return b""
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_ino != self.reports.get(name):
                return b""
            return os.read(fd, cap)
        finally:
            os.close(fd)

    def give_to(self, uid: int):
        """Let a "uid" child write its working folder and report files, and nothing else here."""
        for dirpath, dirnames, filenames in os.walk(self.work):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, uid, uid)
        for name in self.reports:
            os.lchown(self.root / name, uid, uid)

    def output_tail(self, limit: int = 300) -> str:
        return self.output.tail(limit) if self.output else ""

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


class Child:
    """A started child process, and everything needed to end it and whatever it started."""

    def __init__(self, proc: subprocess.Popen, level: str, uid: int | None, marker: str,
                 group: cgroup.Group | None, output: Output | None):
        self.proc, self.level, self.uid, self.marker = proc, level, uid, marker
        self.group, self.output = group, output
        self.killed = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout=timeout)


def start(argv: list[str], scratch: Scratch, limits: Limits, level: str, pass_fds=(), seed: int = 0) -> Child:
    """Start ``python -s -P -B argv...`` in the scratch dir at ``level``, in its own session and
    control group, under the limits."""
    uid, marker = None, secrets.token_hex(12)
    site = scratch.add_site()
    command = [sys.executable, "-s", "-P", "-B", *argv]
    if level == "bwrap":
        command = bwrap_prefix(scratch, limits.scratch_bytes) + command
    elif level == "uid":
        uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
        scratch.give_to(uid)
    env = scrubbed_env(scratch.work, marker, seed, site)
    group = cgroup.create(limits.memory_bytes, limits.max_processes)
    out_r, out_w = os.pipe()
    try:
        proc = subprocess.Popen(command, cwd=scratch.work, env=env, stdin=subprocess.DEVNULL, stdout=out_w,
                                stderr=out_w, pass_fds=pass_fds, start_new_session=True,
                                preexec_fn=_preexec(limits, level, uid, group))
    except BaseException:
        os.close(out_r)
        if group is not None:
            group.remove()
        raise
    finally:
        os.close(out_w)
    scratch.output = Output(out_r, limits.output_bytes)
    return Child(proc, level, uid, marker, group, scratch.output)


def spawn(argv: list[str], scratch: Scratch, limits: Limits, pass_fds=(), seed: int = 0) -> Child:
    """Start a child at the strongest isolation level available (see ``isolation.py``)."""
    return start(argv, scratch, limits, isolation_level(limits), pass_fds, seed)


def kill(child: Child | None) -> None:
    """Kill the child, its process group, and every process it started that got away."""
    if child is None or child.killed:
        return  # once: after that its pid (and group id) may belong to someone else
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if child.group is not None:
        child.group.kill_all()
    try:
        child.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    if child.uid is not None:
        _kill_uid(child.uid)
    if child.group is not None:
        child.group.remove()
    else:
        kill_marked(child.marker)
    if child.returncode is not None:
        child.killed = True
        if child.output is not None:
            child.output.close()


def _kill_uid(uid: int):
    """Every process of the child's private uid, however it detached (setsid, double fork)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (runs in the forked killer)
        try:
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # all processes this uid may signal, except ourselves
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def kill_marked(marker: str) -> int:
    """Kill every process whose environment carries this child's marker; returns how many."""
    needle = f"{MARKER}={marker}".encode()
    killed = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as fh:
                environ = fh.read(1 << 16)
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def exit_status(child: Child | None) -> int | None:
    """The child's exit status; bubblewrap reports a child killed by signal N as 128 + N."""
    code = child.poll() if child is not None else None
    if code is not None and child.level == "bwrap" and 128 < code < 160:
        return 128 - code
    return code


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"killed by signal {-returncode}"
        what = {
            signal.SIGSEGV: "segmentation fault",
            signal.SIGKILL: "killed, often for memory",
            signal.SIGABRT: "aborted",
            signal.SIGXCPU: "CPU time limit",
            signal.SIGBUS: "bus error",
        }.get(sig)
        return f"killed by {sig.name}" + (f" ({what})" if what else "")
    return f"it exited with status {returncode} (sys.exit or os._exit in candidate code?)"
