"""The suite's long CPU-bound pools run in the background, beside the rest of the suite.

The one verify run over the whole kit and the diagnosis-stability reruns built on it are pools
over every core; the rest of the suite runs mostly on one core. So as soon as the session knows
its tests, ``conftest.py`` starts the jobs those tests need, one after another, and moves the
tests that judge them to the end; their fixtures then wait for the results. A test run alone (no
session start) computes its job in place, so every test still works on its own.

A job runs in a process of its own (spawned, from the session's first environment, whatever a
test running beside it has monkeypatched since), never in a thread of the test process: CPython
3.11's compiler is not thread-safe (``ast.parse`` in two threads at once raised "AST constructor
recursion depth mismatch"), and nothing of the job should share state with the tests.

A job is registered under the name of the fixture that serves it, in the order it must run. It
takes a dict of the results of the jobs registered before it.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import traceback
from concurrent.futures import Future, ThreadPoolExecutor

VERIFY_SEED = 7  # the seed of the suite's one verify run, which the stability reruns build on
DEADLINE = 45 * 60  # seconds a fixture waits for its job: far above its ~10 minutes, below CI's 90

JOBS: dict = {}  # fixture name -> function(earlier results) computing its value, in running order
_ENVIRONMENT = dict(os.environ)  # as the session began: conftest imports this before any test runs
_started: dict[str, Future] = {}
_processes: list = []  # the jobs' processes, each the leader of a process group holding its pool
_lock = threading.Lock()  # a process is started and recorded, or stopped, never half of both
_stopped = False
_thread = ThreadPoolExecutor(1, thread_name_prefix="kvgrade-background")  # waits only; one job at a time


def job(name: str):
    """Register the decorated function as the background job serving fixture ``name``."""
    def register(fn):
        JOBS[name] = fn
        return fn
    return register


def start(names) -> None:
    """Start the registered jobs among ``names`` (and those they build on), in registration order."""
    order = list(JOBS)
    wanted = [n for n in order if n in names]
    for name in order[:order.index(wanted[-1]) + 1] if wanted else ():
        if name not in _started:
            _started[name] = _thread.submit(_in_a_process, name, _earlier(name))


def result(name: str):
    """The job's value: waited for when it was started, computed here otherwise."""
    if name not in _started:
        _started[name] = Future()
        _started[name].set_result(JOBS[name]({n: result(n) for n in _earlier(name)}))
    return _started[name].result(timeout=DEADLINE)


def stop() -> None:
    """At the session's end: jobs nobody waited for (their tests did not run: -x, --co, a crash) are
    cancelled, and a running one's process group (the job and its pool) is ended, so the session
    does not wait for it and leaves nothing behind."""
    global _stopped
    for future in _started.values():
        future.cancel()
    with _lock:
        _stopped = True
        for process in _processes:
            if process.exitcode is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except OSError:  # gone, or not yet leading its group: then it has started nothing
                    pass
                process.kill()


def _earlier(name: str) -> list[str]:
    order = list(JOBS)
    return order[:order.index(name)]


def _in_a_process(name: str, earlier: list[str]):
    """Run job ``name`` in a spawned process, given the results of the jobs before it."""
    given = {n: _started[n].result() for n in earlier}
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_run, args=(JOBS[name], given, _ENVIRONMENT, sending), name=f"kvgrade-{name}")
    with _lock:
        if _stopped:
            raise RuntimeError(f"the session ended before the background job {name} started")
        process.start()
        _processes.append(process)
    sending.close()
    try:
        ok, value = receiving.recv()
    except EOFError:
        raise RuntimeError(f"the background job {name} ended without a result (exit code {process.exitcode})") from None
    finally:
        receiving.close()
        process.join(timeout=60)
    if not ok:
        raise RuntimeError(f"the background job {name} failed:\n{value}")
    return value


def _run(fn, given: dict, environment: dict, sending) -> None:
    os.setpgid(0, 0)  # a group of its own, with the pool it starts: stop() ends them together
    os.environ.clear()
    os.environ.update(environment)
    try:
        sending.send((True, fn(given)))
    except BaseException:  # noqa: BLE001  every failure goes back to the fixture that waits
        sending.send((False, traceback.format_exc()))
    finally:
        sending.close()
