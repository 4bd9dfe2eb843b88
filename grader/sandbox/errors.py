"""Faults in candidate code, each an exception whose ``str()`` is the one line a report shows."""
from __future__ import annotations

import re


class CandidateFault(Exception):
    """Something in candidate code went wrong; ``str()`` is the one line a report shows."""


class CandidateRaised(CandidateFault):
    """The candidate's code raised; ``bound`` names the child's limit it reached (with its
    value) when the exception is how that limit shows (None otherwise)."""

    def __init__(self, call: str, error: dict, limits=None):
        self.type_name = error.get("type", "Exception")
        self.mro = error.get("mro", [])
        self.message = error.get("message", "")
        self.where = str(error.get("where") or "")[:200]  # "file.py:line" of the innermost frame, as the child said
        self.bound = bound_reached(self.mro, self.message, limits) if limits is not None else None
        where = f" at {error['where']}" if error.get("where") else ""
        said = f": {self.message}" if self.message else ""
        reached = f" (it reached {self.bound})" if self.bound else ""
        super().__init__(f"{call} raised {self.type_name}{said}{where}{reached}")

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


def bound_reached(mro: list, message: str, limits) -> str | None:
    """The child's limit (a ``launch.Limits``) that an exception of these classes shows, in words
    with its value: fork or thread creation failing (BlockingIOError, errno 11; "can't start
    new thread") is the process limit; MemoryError the memory limit; EFBIG (errno 27) the file size limit."""
    if "BlockingIOError" in mro or ("OSError" in mro and "[Errno 11]" in message) or (
            "RuntimeError" in mro and "can't start new thread" in message):
        return f"the limit of {limits.processes} processes and threads"
    if "MemoryError" in mro:
        return f"the memory limit of {limits.memory_bytes >> 20} MiB"
    if "OSError" in mro and "[Errno 27]" in message:
        return f"the file size limit of {limits.output_bytes >> 20} MiB"
    return None


# Python's own messages when a call does not bind to a function's parameters (its body never ran)
_BINDING_ERRORS = re.compile(r"unexpected keyword argument|missing \d+ required|takes (from )?\d+ (to \d+ )?"
                             r"positional arguments? but|multiple values for argument|positional-only arguments? "
                             r"passed as keyword")


def refused_binding(message: str) -> bool:
    """Whether a TypeError's message is Python's own for a call that does not bind: a renamed parameter
    refused by name, a default the answer does not have."""
    return bool(_BINDING_ERRORS.search(message))
