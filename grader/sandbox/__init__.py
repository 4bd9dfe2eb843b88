"""Running candidate code in a child process; see ``client.Sandbox``.

errors.py (faults), remote.py (proxies, lent objects, call stats), worker.py (one child and
its wire conversation), client.py (the Sandbox facade), launch.py (starting and ending a
child, at a level probed to work), isolation.py (what each level enforces), policy.py (the whole
policy as one value: mounts, rlimits, cgroup limits, environment), cgroup.py (memory and process limits).
"""
from .client import Sandbox
from .errors import (BadValue, CandidateCrashed, CandidateFault, CandidateLoadError, CandidateRaised,
                     CandidateTimeout, CandidateUnavailable)
from .isolation import NOT_ISOLATED, IsolationError, isolation_level, isolation_report, require_isolation
from .policy import Limits, Policy
from .remote import CallStats, Lent, RemoteObject, call_text, describe
from .worker import ModuleToLoad

__all__ = ["BadValue", "CallStats", "CandidateCrashed", "CandidateFault", "CandidateLoadError",
           "CandidateRaised", "CandidateTimeout", "CandidateUnavailable", "IsolationError", "Lent", "Limits",
           "ModuleToLoad", "NOT_ISOLATED", "Policy", "RemoteObject", "Sandbox", "call_text", "describe",
           "isolation_level", "isolation_report", "require_isolation"]
