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
bounds hold. What each level mounts, limits and passes on is one value, ``policy.Policy``; the
level is chosen and probed where children start (``launch.isolation_level``).
``KVGRADE_ISOLATION=bwrap|uid|process`` (or ``Limits(isolation=...)``) asks for a level. A level
that is not installed here (no bubblewrap; not root) gives way to the next one; a level that is
installed but fails its probe twice is an error, never a silent downgrade.
"""
from __future__ import annotations

import functools

from . import cgroup
from .launch import isolation_level
from .policy import GET_BUBBLEWRAP, LEVELS, NOT_ISOLATED, IsolationError, Limits

__all__ = ["GET_BUBBLEWRAP", "LEVELS", "NOT_ISOLATED", "IsolationError", "isolation_level", "isolation_report",
           "require_isolation"]


@functools.cache
def _cgroups_work() -> tuple[bool, bool]:
    """(this machine gives each child a group, that group keeps the child's CPU time)."""
    group = cgroup.create(64 << 20, 8)
    if group is None:
        return False, False
    counts_cpu = group.cpu_seconds() is not None
    group.remove()
    return True, counts_cpu


def isolation_report(limits: Limits | None = None) -> dict:
    """Which bounds hold for children here, for the result and the report header (derived from
    the policy); ``warning`` is the sentence to show on every run at the process level (else None)."""
    return (limits or Limits()).bounds(isolation_level(limits), *_cgroups_work())


def require_isolation(trust: bool, limits: Limits | None = None) -> str:
    """For commands that grade other people's code: the level, or IsolationError (saying how to
    get bubblewrap) at the process level unless ``trust``."""
    level = isolation_level(limits)
    if level == "process" and not trust:
        raise IsolationError("refusing to run other people's code without isolation (level: process): "
                             + GET_BUBBLEWRAP)
    return level
