"""Faults in candidate code, each an exception whose ``str()`` is the one line a report shows."""
from __future__ import annotations


class CandidateFault(Exception):
    """Something in candidate code went wrong; ``str()`` is the one line a report shows."""


class CandidateRaised(CandidateFault):
    def __init__(self, call: str, error: dict):
        self.type_name = error.get("type", "Exception")
        self.mro = error.get("mro", [])
        self.message = error.get("message", "")
        where = f" at {error['where']}" if error.get("where") else ""
        said = f": {self.message}" if self.message else ""
        super().__init__(f"{call} raised {self.type_name}{said}{where}")

    def is_a(self, name: str) -> bool:
        return name in self.mro


class CandidateTimeout(CandidateFault):
    pass


class CandidateCrashed(CandidateFault):
    pass


class CandidateUnavailable(CandidateFault):
    """The candidate code faulted too often (or failed to load); the call was not made."""


class CandidateLoadError(CandidateFault):
    pass


class BadValue(CandidateFault):
    """The child sent something the grader cannot use: not on the wire, out of turn, ill-typed."""


def error_of(reply: dict) -> dict:
    """The error a child reports, with only well-typed, bounded fields (it is the child's word)."""
    error = reply.get("error")
    if not isinstance(error, dict):
        return {"type": "Exception", "mro": [], "message": str(error)[:500] if error else "", "where": ""}
    mro = error.get("mro")
    return {"type": str(error.get("type", "Exception"))[:100],
            "mro": [str(m) for m in mro[:50]] if isinstance(mro, list) else [],
            "message": str(error.get("message", ""))[:2000],
            "where": str(error.get("where", ""))[:200]}
