"""Starting a child process for candidate code: scratch directory, scrubbed environment, limits,
a control group, and the strongest OS isolation this machine offers (see ``isolation.py``).

Everything that decides *how* a child runs lives here, so the candidate-module worker and the
candidate-tests runner share one policy:

- ``python -s -P -B``: no user site, no script folder on ``sys.path``, no ``__pycache__``
  written. (Not ``-I``: it implies ``-E``, which would ignore the ``PYTHONHASHSEED`` we set.)
  The environment is built from nothing, so no variable of the grader's reaches the child.
- ``sitecustomize`` seeds Python's ``random`` and numpy's global generator from one fixed seed
  (``policy.CHILD_SEED``), in every child (own-test children too), so a run replays whatever the
  candidate draws.
- stdout and stderr go to a pipe the grader drains: output past the cap is dropped, the
  child's writes never fail because of it, and nothing the child can reach is reopened.
"""
from __future__ import annotations

import ctypes
import functools
import os
import resource
import secrets
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

from .. import plainfile
from . import cgroup
from .policy import LEVELS, PYTHON, IsolationError, Limits

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


def scrubbed_env(home: Path, marker: str = "", site: Path | None = None,
                 policy: Limits | None = None) -> dict:
    """Only what Python and a single-threaded BLAS need; nothing of the grader's environment."""
    return (policy or Limits()).environment_for(home, marker, site, MARKER)


def _unshare_network():
    """Best effort, for the "uid" level: a network namespace of its own has no interfaces."""
    if _libc is not None:
        _libc.unshare(0x40000000)  # CLONE_NEWNET; failure leaves the network reachable


def _no_new_privs():
    if _libc is not None:
        _libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid binaries cannot raise privileges


def _preexec(limits: Limits, level: str, uid: int | None, group: cgroup.Group | None):
    rlimits = limits.rlimits(level)  # computed before the fork: nothing to allocate in the child

    def preexec():
        if group is not None:
            group.join()  # first: everything below, and every fork, is counted
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))
        if level == "uid":
            _unshare_network()
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        if level != "bwrap":  # bwrap would refuse to start; it drops capabilities itself
            _no_new_privs()

    return preexec


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
            data = source if isinstance(source, bytes) else plainfile.read_plain_file(source, MAX_COPY_BYTES)
            (target / name).write_bytes(data)
        return target

    def read_private(self, name: str, cap: int = 1 << 20) -> bytes:
        """Up to ``cap`` bytes of a report file the child wrote (e.g. ``junit.xml``), from the
        very file the grader created: b"" if it was replaced or is not a regular file."""
        if name not in self.reports:
            return b""
        try:
            return b"".join(plainfile.head_chunks(self.root / name, cap, inode=self.reports[name]))
        except OSError:  # gone, replaced, or not a regular file (NotPlain)
            return b""

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

    def cpu_seconds(self) -> float:
        """CPU time the child and everything it started have used so far (``tree_cpu_seconds``)."""
        return tree_cpu_seconds(self.pid, self.group)

    def runnable(self) -> bool:
        """Whether the child or anything it started is computing or waiting for a CPU (``tree_runnable``)."""
        return tree_runnable(self.pid, self.group)

    def wait(self, timeout: float | None = None) -> int:
        """The exit status, waiting at most ``timeout`` s (TimeoutExpired after). Woken by the
        exit itself through a pidfd: ``Popen.wait(timeout)`` polls in sleeps of up to 50 ms, which
        each child's end paid in full (about a tenth of a small exercise's grading)."""
        if timeout is None or self.proc.returncode is not None:
            return self.proc.wait(timeout=timeout)
        try:
            fd = os.pidfd_open(self.proc.pid)
        except (AttributeError, OSError):  # no pidfd here, or the child is already reaped
            return self.proc.wait(timeout=timeout)
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll(max(0, int(timeout * 1000)))  # readable once the child has exited
        finally:
            os.close(fd)
        return self.proc.wait(timeout=0)  # reaps it, or TimeoutExpired if it still runs


_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int, group: cgroup.Group | None = None) -> float:
    """CPU time (user + system, every thread) that process ``root`` and everything it started have used
    so far, as the kernel counts it, so candidate code cannot rewrite or hide it. Where ``group`` keeps a
    CPU figure, that: every process that ever ran in it, however it ended. Otherwise the processes
    below ``root``, the children each has waited for (a worker that forked, worked and was reaped),
    and any process of ``group`` that got away from the tree; a child nobody reaped (its parent
    ignoring SIGCHLD) is then lost, as the README says. Waiting costs none. OSError when ``root``
    cannot be read."""
    counted = group.cpu_seconds() if group is not None else None
    if counted is not None:
        return counted
    seconds = 0.0
    for pid in _tree(root, group):
        try:  # a parent is read before its children: one reaped in between is counted once, in the parent
            seconds += _own_and_reaped_seconds(pid)
        except OSError:
            if pid == root:
                raise
    return seconds


def tree_runnable(root: int, group: cgroup.Group | None = None) -> bool:
    """Whether a thread of ``root``, of a process below it or of ``group`` is running or waiting for a
    CPU (state R in /proc, which the kernel writes), and none has given up its share: every thread at
    the grader's own nice or below, under the normal policy, and every process's autogroup at nice 0 or
    below (a child can lower its priority, not raise it: so a wait stretched for a busy machine is the
    machine's doing, never a child starving itself to hold the grader; red team 25)."""
    runnable, ours = False, os.getpriority(os.PRIO_PROCESS, 0)
    for pid in _tree(root, group):
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
            if _autogroup_nice(pid) > 0:
                return False
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if len(fields) < 39 or int(fields[16]) > ours or fields[38] != b"0":  # nice (field 19), policy (41)
                return False
            runnable |= fields[:1] == [b"R"]
    return runnable


def _autogroup_nice(pid: int) -> int:
    """The nice of ``pid``'s autogroup (/proc/PID/autogroup: "/autogroup-N nice K"); 0 where there is none."""
    try:
        with open(f"/proc/{pid}/autogroup", "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return 0


def _tree(root: int, group: cgroup.Group | None):
    """``root``, every process below it (parents first), then the processes of ``group`` outside
    that tree (strays that detached), each once."""
    seen, todo, strays = set(), [root], group is not None
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        yield pid
        todo += _children(pid)
        if not todo and strays:  # the tree is done: the group's processes outside it, read once
            todo, strays = [p for p in group.pids() if p not in seen], False


def _own_and_reaped_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of ``pid`` (/proc/PID/stat fields 14-17)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / _TICKS


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (a worker forked from a thread is that thread's)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                found += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return found


def start(argv: list[str], scratch: Scratch, limits: Limits, level: str, pass_fds=()) -> Child:
    """Start ``python -s -P -B argv...`` in the scratch dir at ``level``, in its own session and
    control group, under the limits."""
    uid, marker = None, secrets.token_hex(12)
    site = scratch.add_site()
    command = [PYTHON, "-s", "-P", "-B", *argv]
    if level == "bwrap":
        command = limits.bwrap_args(scratch) + command
    elif level == "uid":
        uid = secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0]) + _UID_RANGE[0]
        scratch.give_to(uid)
    env = scrubbed_env(scratch.work, marker, site, limits)
    group = cgroup.create(*limits.cgroup_limits())
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


def spawn(argv: list[str], scratch: Scratch, limits: Limits, pass_fds=()) -> Child:
    """Start a child at the strongest isolation level available (see ``isolation_level``)."""
    return start(argv, scratch, limits, isolation_level(limits), pass_fds)


def isolation_level(limits: Limits | None = None) -> str:
    """The level children get: the one asked for (or the strongest), if this machine has it.

    A level not installed here gives way to the next; one installed whose probe (a real child
    running ``import numpy``) fails twice is an ``IsolationError``, never a silent downgrade.
    """
    wanted = (limits.isolation if limits else None) or os.environ.get("KVGRADE_ISOLATION") or "bwrap"
    if wanted not in LEVELS:
        raise IsolationError(f"unknown isolation level {wanted!r} (KVGRADE_ISOLATION or Limits.isolation); "
                             f"choose from {', '.join(LEVELS)}")
    for level in LEVELS[LEVELS.index(wanted):]:
        if not _installed(level):
            continue
        why = _failure(level)
        if why is None:
            return level
        weaker = LEVELS[LEVELS.index(level) + 1]
        raise IsolationError(f"the {level} isolation level is installed but does not work here: {why} "
                             f"(tried twice); fix it, or ask for a weaker level with KVGRADE_ISOLATION={weaker}")
    return "process"


def _installed(level: str) -> bool:
    if level == "bwrap":
        return shutil.which("bwrap") is not None
    if level == "uid":  # root, and a Python that a fresh uid may run
        return os.geteuid() == 0 and _world_executable(Path(os.path.realpath(PYTHON)))
    return True


def _world_executable(path: Path) -> bool:
    try:
        return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])
    except OSError:
        return False


@functools.cache
def _failure(level: str) -> str | None:
    """Why ``level`` does not work here (None: it works); a failed probe is retried once."""
    if level == "process":
        return None
    why = _probe(level)
    return why and _probe(level)


def _probe(level: str) -> str | None:
    """Run ``import numpy`` in a child at ``level``: None when it works, else why not."""
    scratch = Scratch(prefix="kvgrade-probe-")
    try:
        child = start(["-c", "import numpy; print('kvgrade-ok')"], scratch, Limits(), level)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        kill(child)
        output = scratch.output_tail(300)
        if child.returncode == 0 and "kvgrade-ok" in output:
            return None
        last = output.splitlines()[-1][:200] if output else "no output"
        if child.returncode is None:
            return "it did not finish within 30 s"
        return f"it exited with {child.returncode}: {last}"
    except OSError as exc:
        return f"it could not start: {exc}"
    finally:
        scratch.remove()


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
        child.wait(timeout=5)
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
