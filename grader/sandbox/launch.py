"""Starting a child process for candidate code: scratch directory, scrubbed environment, limits,
and the strongest OS isolation this machine offers.

Everything that decides *how* a child runs lives here, so the candidate-module worker and the
candidate-tests runner share one policy.

Isolation levels, probed once per process with a tiny real run and cached:

- ``bwrap``: bubblewrap with every namespace unshared (no network, own pid namespace, no
  view of other processes), capabilities dropped, read-only binds of only what Python needs,
  a fresh /tmp and the child's scratch directory as the one writable place. The kit (hidden
  checks, references, rubrics) is not in the child's file system at all.
- ``uid``: when the grader runs as root without bubblewrap: the child runs under a fresh
  unprivileged uid (one per child, so every process it leaves behind can be killed by uid),
  in its own network namespace when the kernel allows it, with ``no_new_privs``.
- ``process``: a child process of the grader's own user; protects against accidents
  (hangs, crashes, floods, memory bombs), not against a deliberate attack on the machine.

``KVGRADE_ISOLATION=bwrap|uid|process`` (or ``Limits(isolation=...)``) asks for a level; a level
the machine cannot provide falls back to the next one, and the level used is reported.
"""
from __future__ import annotations

import ctypes
import functools
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RUNTIME_DIR = "kvgrade-runtime"  # child.py and wire.py are copied here; also a traceback filter
LEVELS = ("bwrap", "uid", "process")  # strongest first
MARKER = "KVGRADE_SANDBOX"  # per-child token in the environment, to find escaped processes
_HERE = Path(__file__).resolve().parent
_GRADER_PACKAGE = _HERE.parent
_KIT_ROOT = _GRADER_PACKAGE.parent
TMPFS_BYTES = 64 << 20  # the child's private /tmp under bubblewrap
MAX_COPY_BYTES = 4 << 20  # a file copied into scratch (kit helpers are far smaller)
_UID_RANGE = (1_800_000_000, 1_900_000_000)  # fresh uids for the "uid" level; no passwd entry needed

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _libc = None


class IsolationError(ValueError):
    """An isolation level that does not exist was asked for (e.g. in $KVGRADE_ISOLATION)."""


@dataclass(frozen=True)
class Limits:
    """What one child may use. Times are wall-clock seconds."""

    call_seconds: float = 10.0  # one call into candidate code
    load_seconds: float = 20.0  # importing the candidate module
    memory_bytes: int = 2 << 30  # address space; numpy with one BLAS thread is happy in 2 GiB
    output_bytes: int = 8 << 20  # every file the child writes, its stdout/stderr log included
    cpu_seconds: int = 300
    open_files: int = 256
    processes: int = 0  # RLIMIT_NPROC at the "uid" level (0: 64); other levels rely on the kill
    max_faults: int = 2  # timeouts or crashes before an exercise stops calling the candidate
    exercise_seconds: float = 120.0  # one exercise's candidate code: import, calls, own tests
    isolation: str | None = None  # None: the strongest available (or $KVGRADE_ISOLATION)


def scrubbed_env(home: Path, marker: str = "") -> dict:
    """Only what Python and a single-threaded BLAS need; nothing of the grader's environment."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    # Some machines need these to keep OpenBLAS from crashing; they carry no secrets.
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        if key in os.environ:
            env[key] = os.environ[key]
    if marker:
        env[MARKER] = marker
    return env


# -- isolation ------------------------------------------------------------------------------


def _python_roots() -> list[str]:
    """Directories the child's Python needs to read: the installation and numpy/pytest's homes."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    import importlib.util
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
    return kept


def _bwrap_prefix(scratch_root: Path, work: Path) -> list[str]:
    bwrap = shutil.which("bwrap")
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                "/etc/localtime"):
        args += ["--ro-bind-try", etc, etc]
    # A private /tmp first: what is bound later (a venv or the scratch dir under /tmp) shows
    # through it, instead of being hidden by it.
    if _bwrap_has("--size"):  # /tmp is memory: cap it (bubblewrap >= 0.8)
        args += ["--size", str(TMPFS_BYTES)]
    args += ["--tmpfs", "/tmp"]
    binds = ["/usr"]
    for root in _python_roots():
        if not any(root == b or root.startswith(b + "/") for b in binds):
            args += ["--ro-bind", root, root]
            binds.append(root)
    # If the kit lives inside something bound (e.g. installed into site-packages), hide it.
    # (Each secret folder separately: the kit's root may then be site-packages itself.)
    for secret in (_GRADER_PACKAGE, _KIT_ROOT / "solutions", _KIT_ROOT / "rubrics"):
        if secret.is_dir() and any(str(secret).startswith(b + "/") for b in binds):
            args += ["--tmpfs", str(secret)]
    args += ["--bind", str(scratch_root), str(scratch_root),
             "--proc", "/proc", "--dev", "/dev", "--chdir", str(work), "--"]
    return args


@functools.cache
def _bwrap_has(option: str) -> bool:
    try:
        out = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


def _unshare_network():
    """Best effort, for the "uid" level: a network namespace of its own has no interfaces."""
    if _libc is not None:
        _libc.unshare(0x40000000)  # CLONE_NEWNET; failure leaves the network reachable


def _no_new_privs():
    if _libc is not None:
        _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid binaries cannot raise privileges


def _probe(level: str) -> bool:
    """Can a child really run at ``level`` here? A tiny real run: import numpy in the child."""
    if level == "process":
        return True
    if level == "bwrap" and not shutil.which("bwrap"):
        return False
    if level == "uid" and os.geteuid() != 0:
        return False
    scratch = Scratch(prefix="kvgrade-probe-")
    try:
        proc = _popen(["-c", "import numpy; print('kvgrade-ok')"], scratch, Limits(), level, (), "")
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        kill(proc)
        return proc.returncode == 0 and "kvgrade-ok" in scratch.output_tail()
    except OSError:
        return False
    finally:
        scratch.remove()


@functools.cache
def _available(level: str) -> bool:
    return _probe(level)


def isolation_level(limits: Limits | None = None) -> str:
    """The level children get: the one asked for (or the strongest), if this machine has it."""
    wanted = (limits.isolation if limits else None) or os.environ.get("KVGRADE_ISOLATION") or "bwrap"
    if wanted not in LEVELS:
        raise IsolationError(f"unknown isolation level {wanted!r} (KVGRADE_ISOLATION or Limits.isolation); "
                             f"choose from {', '.join(LEVELS)}")
    for level in LEVELS[LEVELS.index(wanted):]:
        if _available(level):
            return level
    return "process"


# -- children ---------------------------------------------------------------------------------


def _preexec(limits: Limits, level: str, uid: int | None):
    def preexec():
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        if level == "uid":
            _unshare_network()
            nproc = limits.processes or 64
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if level != "bwrap":  # bwrap would refuse to start; it drops capabilities itself
            _no_new_privs()

    return preexec


def read_plain_file(path: Path, cap: int = MAX_COPY_BYTES) -> bytes:
    """The bytes of a regular file, read from a descriptor opened without following a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = os.read(fd, cap + 1)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise OSError(f"{path.name} is over {cap:,} bytes")
    return data


class Scratch:
    """A private directory for one child: runtime files, kit helpers, candidate files, cwd."""

    def __init__(self, prefix: str = "kvgrade-"):
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.work = self.root / "work"
        self.work.mkdir()
        self.log = self.root / "output.log"

    def add_runtime(self) -> Path:
        runtime = self.root / RUNTIME_DIR
        runtime.mkdir(exist_ok=True)
        for name in ("child.py", "wire.py"):
            shutil.copyfile(_HERE / name, runtime / name)
        return runtime / "child.py"

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

    def give_to(self, uid: int):
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
                os.lchown(name, uid, uid)

    def output_tail(self, limit: int = 300) -> str:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - limit))
                return fh.read(limit).decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


def _popen(argv, scratch: Scratch, limits: Limits, level: str, pass_fds, marker: str):
    uid = None
    command = [sys.executable, "-I", *argv]
    if level == "bwrap":
        command = _bwrap_prefix(scratch.root, scratch.work) + command
    elif level == "uid":
        uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
        scratch.give_to(uid)
    log = open(scratch.log, "ab")
    try:
        proc = subprocess.Popen(
            command,
            cwd=scratch.work,
            env=scrubbed_env(scratch.work, marker),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=_preexec(limits, level, uid),
        )
    finally:
        log.close()
    proc.kvgrade_level, proc.kvgrade_uid, proc.kvgrade_marker = level, uid, marker
    return proc


def spawn(argv: list[str], scratch: Scratch, limits: Limits, pass_fds=()) -> subprocess.Popen:
    """Start ``python -I argv...`` in the scratch dir, in its own session, under the limits,
    at the strongest isolation level available (see the module docstring)."""
    return _popen(argv, scratch, limits, isolation_level(limits), pass_fds, secrets.token_hex(12))


def kill(proc: subprocess.Popen | None) -> None:
    """Kill the child, its process group, and every process it started that got away."""
    if proc is None or getattr(proc, "kvgrade_killed", False):
        return  # once: after that its pid (and group id) may belong to someone else
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    uid = getattr(proc, "kvgrade_uid", None)
    if uid is not None:
        _kill_uid(uid)
    marker = getattr(proc, "kvgrade_marker", "")
    if marker:
        kill_marked(marker)
    if proc.returncode is not None:
        proc.kvgrade_killed = True


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


def exit_status(proc: subprocess.Popen | None) -> int | None:
    """The child's exit status; bubblewrap reports a child killed by signal N as 128 + N."""
    code = proc.poll() if proc is not None else None
    if code is not None and getattr(proc, "kvgrade_level", "") == "bwrap" and 128 < code < 160:
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
