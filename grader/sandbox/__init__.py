"""Running candidate code in a child process; see ``client.Sandbox``."""
from .client import (BadValue, CandidateCrashed, CandidateFault, CandidateLoadError,
                     CandidateRaised, CandidateTimeout, CandidateUnavailable, Lent, ModuleToLoad,
                     RemoteObject, Sandbox, call_text, describe)
from .launch import Limits

__all__ = ["BadValue", "CandidateCrashed", "CandidateFault", "CandidateLoadError",
           "CandidateRaised", "CandidateTimeout", "CandidateUnavailable", "Lent", "Limits",
           "ModuleToLoad", "RemoteObject", "Sandbox", "call_text", "describe"]
