"""How strongly a child is isolated, probed once per process with a tiny real run.

- ``bwrap``: bubblewrap with every namespace unshared (no network, own pid namespace, no view
  of other processes), capabilities dropped, read-only binds of only what Python needs, a root
  that is read-only once the binds are made, and size-capped memory file systems as the only
  writable places (the scratch folder and /tmp). The kit (hidden checks, references, rubrics)
  is not in the child's file system at all.
- ``uid``: when the grader runs as root without bubblewrap: the child runs under a fresh
  unprivileged uid (one per child, so every process it leaves behind can be killed by uid),
  in its own network namespace when the kernel allows it, with ``no_new_privs``.
- ``process``: a child process of the grader's own user. It protects against accidents (hangs,
  crashes, floods, memory bombs), not against a deliberate attack: it is for one's own code.

Where the machine has writable cgroups, every level also puts each child in a group of its own
with a memory and a process limit (see ``cgroup.py``); :func:`isolation_report` says which
bounds hold. ``KVGRADE_ISOLATION=bwrap|uid|process`` (or ``Limits(isolation=...)``) asks for a
level. A level that is not installed here (no bubblewrap; not root) gives way to the next one;
a level that is installed but fails its probe twice is an error, never a silent downgrade.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import cgroup

LEVELS = ("bwrap", "uid", "process")  # strongest first
TMP_BYTES = 64 << 20  # the child's private /tmp under bubblewrap
NOT_ISOLATED = "not isolated: grade only code you trust"
GET_BUBBLEWRAP = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
                  "it needs Linux), or pass --trust-submissions to grade code you trust without isolation")
_HERE = Path(__file__).resolve().parent
_GRADER_PACKAGE = _HERE.parent
_KIT_ROOT = _GRADER_PACKAGE.parent


class IsolationError(ValueError):
    """An isolation level that does not exist or does not work was asked for; a usage error."""


def _python_roots() -> list[str]:
    """Directories the child's Python needs to read: the installation and numpy/pytest's homes."""
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    roots.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
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


def bwrap_prefix(scratch, scratch_bytes: int) -> list[str]:
    """The bubblewrap command line that runs a child over ``scratch`` (a ``launch.Scratch``)."""
    args = [shutil.which("bwrap"), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
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
    args += _sized(TMP_BYTES) + ["--tmpfs", "/tmp"]
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
    args += _scratch_mounts(scratch, scratch_bytes)
    return args + ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/", "--chdir", str(scratch.work), "--"]


def _scratch_mounts(scratch, scratch_bytes: int) -> list[str]:
    """Scratch is a size-capped memory file system; what the grader prepared is bound into it
    read-only, and the files a child reports into (``scratch.reports``) writable, one by one, so
    the child can fill them but never replace them with a link or a FIFO."""
    root = scratch.root
    args = _sized(scratch_bytes) + ["--tmpfs", str(root)]
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
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout + out.stderr


def _installed(level: str) -> bool:
    if level == "bwrap":
        return shutil.which("bwrap") is not None
    if level == "uid":  # root, and a Python that a fresh uid may run
        return os.geteuid() == 0 and _world_executable(Path(os.path.realpath(sys.executable)))
    return True


def _world_executable(path: Path) -> bool:
    try:
        return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])
    except OSError:
        return False


def _probe(level: str) -> str | None:
    """Run ``import numpy`` in a child at ``level``: None when it works, else why not."""
    from .launch import Limits, Scratch, kill, start  # launch starts children; it imports us
    scratch = Scratch(prefix="kvgrade-probe-")
    try:
        child = start(["-c", "import numpy; print('kvgrade-ok')"], scratch, Limits(), level)
        deadline = time.monotonic() + 30
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        kill(child)
        output = scratch.output_tail(300)
        if child.returncode == 0 and "kvgrade-ok" in output:
            return None
        last = output.splitlines()[-1][:200] if output else "no output"
        return "it did not finish within 30 s" if child.returncode is None else f"it exited with {child.returncode}: {last}"
    except OSError as exc:
        return f"it could not start: {exc}"
    finally:
        scratch.remove()


@functools.cache
def _failure(level: str) -> str | None:
    """Why ``level`` does not work here (None: it works); a failed probe is retried once."""
    if level == "process":
        return None
    why = _probe(level)
    return why and _probe(level)


def isolation_level(limits=None) -> str:
    """The level children get: the one asked for (or the strongest), if this machine has it."""
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


@functools.cache
def _cgroups_work() -> bool:
    group = cgroup.create(64 << 20, 8)
    if group is None:
        return False
    group.remove()
    return True


def isolation_report(limits=None) -> dict:
    """Which bounds hold for children here, for the result and the report header.

    ``warning`` is the sentence to show on every run at the process level (else None).
    """
    level = isolation_level(limits)
    groups = _cgroups_work()
    return {
        "level": level,
        "memory": "cgroup" if groups else "rlimit",
        "pids": "cgroup" if groups else ("rlimit" if level == "uid" else "none"),
        "scratch": "tmpfs" if level == "bwrap" and _bwrap_has("--size") else "disk",
        "root": "read-only" if level == "bwrap" else "host",
        "network": "none" if level == "bwrap" else ("own namespace, best effort" if level == "uid" else "host"),
        "warning": NOT_ISOLATED if level == "process" else None,
    }


def require_isolation(trust: bool, limits=None) -> str:
    """For commands that grade other people's code: the level, or IsolationError (a usage
    error, saying how to get bubblewrap) at the process level unless ``trust``."""
    level = isolation_level(limits)
    if level == "process" and not trust:
        raise IsolationError(f"refusing to run other people's code without isolation (level: process): {GET_BUBBLEWRAP}")
    return level
