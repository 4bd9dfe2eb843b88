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

Under pytest-xdist (the README's command: ``-n 2``) each worker is a session of its own, so the
jobs run once, in the controller, the process that starts the workers and outlives them: the
workers write the plan (which jobs, by name and module, in order) into a folder the controller
shares with them; the controller starts the jobs once a worker has collected, and publishes each
result there as a file, which a worker's fixture waits for.
"""
from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

VERIFY_SEED = 7  # the seed of the suite's one verify run, which the stability reruns build on
DEADLINE = 45 * 60  # seconds a fixture waits for its job: far above its ~10 minutes, below CI's 90

JOBS: dict = {}  # fixture name -> function(earlier results) computing its value, in running order
_ENVIRONMENT = dict(os.environ)  # as the session began: conftest imports this before any test runs
_started: dict[str, Future] = {}
_processes: list = []  # the jobs' processes, each the leader of a process group holding its pool
_lock = threading.Lock()  # a process is started and recorded, or stopped, never half of both
_stopped = False
_thread = ThreadPoolExecutor(1, thread_name_prefix="kvgrade-background")  # waits only; one job at a time
_shared: Path | None = None  # xdist: the folder the controller and its workers share
_is_worker = False  # xdist: this session is a worker (its jobs run in the controller)
_planned: set = set()  # a worker: the jobs it asked the controller for
PLAN = "plan.json"


def job(name: str):
    """Register the decorated function as the background job serving fixture ``name``."""
    def register(fn):
        JOBS[name] = fn
        return fn
    return register


def share(folder: Path, worker: bool) -> None:
    """Under xdist: run the jobs in the controller (``worker`` False) or wait for them (True), through ``folder``."""
    global _shared, _is_worker
    _shared, _is_worker = Path(folder), worker


def shared_folder() -> Path | None:
    return _shared


def start(names) -> None:
    """Start the registered jobs among ``names`` (and those they build on), in registration order;
    a worker writes them as the controller's plan instead."""
    order = list(JOBS)
    wanted = [n for n in order if n in names]
    needed = order[:order.index(wanted[-1]) + 1] if wanted else []
    if _is_worker:
        _planned.update(needed)
        plan = _shared / f".{PLAN}.{os.getpid()}"
        plan.write_text(json.dumps([[n, JOBS[n].__module__] for n in needed]))
        os.replace(plan, _shared / PLAN)  # the workers collect alike: whichever lands last, the plan is one
        return
    for name in needed:
        if name not in _started:
            _started[name] = _thread.submit(_in_a_process, name, _earlier(name))
            if _shared is not None:
                _started[name].add_done_callback(lambda future, name=name: _publish(name, future))


def start_planned() -> None:
    """The controller, once a worker has collected: start the jobs of its plan (importing the modules
    that register them, as the workers did)."""
    plan = _shared / PLAN
    if _shared is None or not plan.is_file():
        return
    steps = json.loads(plan.read_text())
    for _, module in steps:
        importlib.import_module(module)
    start({n for n, _ in steps})


def _publish(name: str, future: Future) -> None:
    """The controller: a finished job's result (or its failure) as a file its workers read."""
    if future.cancelled():
        return
    failure = future.exception()
    payload = (False, "".join(traceback.format_exception(failure))) if failure else (True, future.result())
    partial = _shared / f".{name}.partial"
    partial.write_bytes(pickle.dumps(payload))
    os.replace(partial, _shared / f"{name}.result")


def _published(name: str):
    """A worker: the controller's result of job ``name``, waited for up to ``DEADLINE``."""
    path, give_up = _shared / f"{name}.result", time.monotonic() + DEADLINE
    while not path.is_file():
        if time.monotonic() > give_up:
            raise TimeoutError(f"the background job {name} published nothing in {DEADLINE} s")
        time.sleep(1)
    ok, value = pickle.loads(path.read_bytes())
    if not ok:
        raise RuntimeError(f"the background job {name} failed in the controller:\n{value}")
    return value


def result(name: str):
    """The job's value: waited for when it was started (or, in a worker, planned), computed here otherwise."""
    if _is_worker and name in _planned:
        return _published(name)
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
