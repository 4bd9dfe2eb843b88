"""The suite's long CPU-bound pools run in the background, beside the rest of the suite.

The one verify run over the whole kit and the diagnosis-stability reruns built on it are pools
over every core; the rest of the suite runs mostly on one core. So as soon as the session knows
its tests, ``conftest.py`` starts the jobs those tests need, one after another in a thread, and
moves the tests that judge them to the end; their fixtures then wait for the results. A test run
alone (no session start) computes its job in place, so every test still works on its own.

A job is registered under the name of the fixture that serves it, in the order it must run (a
job may read the result of one registered before it). A job's pool comes from ``pool()``, whose
workers start from the session's first environment, whatever a test running beside it has
monkeypatched; verify's own pool is spawned before the first test runs (every subject is submitted
at once), so it starts from that environment too.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor

VERIFY_SEED = 7  # the seed of the suite's one verify run, which the stability reruns build on

JOBS: dict = {}  # fixture name -> function computing its value, in registration (= running) order
_started: dict[str, Future] = {}
_ENVIRONMENT = dict(os.environ)  # as the session began: conftest imports this before any test runs
_thread = ThreadPoolExecutor(1, thread_name_prefix="kvgrade-background")  # one job at a time: each uses every core


def pool() -> ProcessPoolExecutor:
    """A pool over every core whose workers start from the session's first environment: a job's
    workers may be spawned while a test has monkeypatched os.environ (KVGRADE_ISOLATION, ...)."""
    return ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_environment, initargs=(_ENVIRONMENT,))


def _environment(values: dict) -> None:
    os.environ.clear()
    os.environ.update(values)


def job(name: str):
    """Register the decorated function as the background job serving fixture ``name``."""
    def register(fn):
        JOBS[name] = fn
        return fn
    return register


def start(names) -> None:
    """Start the registered jobs among ``names``, in registration order."""
    for name, fn in JOBS.items():
        if name in names and name not in _started:
            _started[name] = _thread.submit(fn)


def result(name: str):
    """The job's value: waited for when it was started, computed here otherwise."""
    if name not in _started:
        _started[name] = Future()
        _started[name].set_result(JOBS[name]())
    return _started[name].result()


def stop() -> None:
    """At the session's end: jobs nobody waited for (their tests did not run: -x, a crash) are
    cancelled, and a running one's pool workers are ended, so the session does not wait for them."""
    for future in _started.values():
        future.cancel()
    if not all(f.done() for f in _started.values()):
        for child in multiprocessing.active_children():
            child.terminate()
