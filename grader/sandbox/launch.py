"""Starting a child process for candidate code: scratch directory, scrubbed environment, limits.

Everything that decides *how* a child runs lives here, so the candidate-module worker and the
candidate-tests runner share one policy.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

RUNTIME_DIR = "kvgrade-runtime"  # child.py and wire.py are copied here; also a traceback filter
_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Limits:
    """What one child may use. Times are wall-clock seconds."""

    call_seconds: float = 10.0  # one call into candidate code
    load_seconds: float = 20.0  # importing the candidate module
    memory_bytes: int = 2 << 30  # address space; numpy with one BLAS thread is happy in 2 GiB
    output_bytes: int = 8 << 20  # every file the child writes, its stdout/stderr log included
    cpu_seconds: int = 300
    open_files: int = 256
    max_faults: int = 2  # timeouts or crashes before an exercise stops calling the candidate


def scrubbed_env(home: Path) -> dict:
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
    return env


def _apply_limits(limits: Limits):
    def preexec():
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.output_bytes, limits.output_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))

    return preexec


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
        """Copy ``files`` (paths, or (name, path) pairs) into ``folder``; later ones win."""
        target = self.root / folder
        target.mkdir(exist_ok=True)
        for item in files:
            name, path = item if isinstance(item, tuple) else (Path(item).name, item)
            shutil.copyfile(path, target / name)
        return target

    def output_tail(self, limit: int = 300) -> str:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(max(0, self.log.stat().st_size - limit))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def remove(self):
        shutil.rmtree(self.root, ignore_errors=True)


def spawn(argv: list[str], scratch: Scratch, limits: Limits, pass_fds=()) -> subprocess.Popen:
    """Start ``python -I argv...`` in the scratch dir, in its own session, under the limits."""
    log = open(scratch.log, "ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-I", *argv],
            cwd=scratch.work,
            env=scrubbed_env(scratch.work),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=pass_fds,
            start_new_session=True,
            preexec_fn=_apply_limits(limits),
        )
    finally:
        log.close()


def kill(proc: subprocess.Popen) -> None:
    """Kill the child and everything in its process group, then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        sig = signal.Signals(-returncode)
        what = {
            signal.SIGSEGV: "segmentation fault",
            signal.SIGKILL: "killed, often for memory",
            signal.SIGABRT: "aborted",
            signal.SIGXCPU: "CPU time limit",
        }.get(sig)
        return f"killed by {sig.name}" + (f" ({what})" if what else "")
    return f"it exited with status {returncode} (sys.exit or os._exit in candidate code?)"
