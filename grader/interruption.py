"""Ending a grading on Ctrl-C or SIGTERM without leaving anything behind.

The engine grades inside :func:`ended_by_signals` and calls :func:`stop_if_signalled` between
its stages; everything that holds a child or a scratch folder cleans up in ``finally``.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading

_SIGNALLED: list[int] = []  # signals the main thread's grading received (see ended_by_signals)


@contextlib.contextmanager
def ended_by_signals():
    """Ctrl-C and SIGTERM end a grading as a KeyboardInterrupt in the main thread, so every child
    is killed and every scratch folder removed on the way out. Only signals at their default are
    taken (a batch's handlers, or a worker ignoring SIGINT, stay). Python drops an exception
    raised where it cannot propagate (a fork hook: it goes to ``sys.unraisablehook``), so each
    signal is also recorded, and :func:`stop_if_signalled` raises it again between stages."""
    defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    ours = [s for s, handler in defaults.items() if threading.current_thread() is threading.main_thread()
            and signal.getsignal(s) is handler]

    def end(signum, frame):
        _SIGNALLED.append(signum)
        raise KeyboardInterrupt

    previous_hook = sys.unraisablehook

    def quiet(unraisable):  # the one Python dropped (and printed) is raised again: print nothing
        if not (_SIGNALLED and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            previous_hook(unraisable)

    for s in ours:
        signal.signal(s, end)
    if ours:
        sys.unraisablehook = quiet
    try:
        yield
    finally:
        for s in ours:
            signal.signal(s, defaults[s])
        if ours:
            sys.unraisablehook = previous_hook
            _SIGNALLED.clear()


def stop_if_signalled():
    """Raise the interruption again where it is safe (between stages), if one was received."""
    if _SIGNALLED:
        raise KeyboardInterrupt
