"""`kvgrade grade` interrupted by SIGTERM or Ctrl-C leaves no scratch folder behind (issue 24, item 8):
a real process, a real signal, while a candidate's child is running and while its own tests run."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"

SLOW_MODULE = '''
import time
import numpy as np


def decode_causal_mask(T, S):
    time.sleep(5)
    return np.tril(np.ones((T, S), bool), k=S - T)
'''
SLOW_TESTS = '''
import time


def test_slowly():
    time.sleep(60)
'''


def _grading(tmp_path: Path, module: str, tests: str | None) -> tuple[subprocess.Popen, Path]:
    submission, scratch = tmp_path / "sub", tmp_path / "tmp"
    submission.mkdir()
    scratch.mkdir()
    (submission / "decode_mask.py").write_text(module)
    if tests:
        (submission / "test_decode_mask.py").write_text(tests)
    proc = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(submission), "-e", "decode_mask",
                             "--seed", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch)},
                            preexec_fn=_default_signals)  # a background job inherits SIGINT ignored
    return proc, scratch


def _default_signals():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # then Python raises KeyboardInterrupt on it, as in a terminal


def _wait_for(condition, proc, what: str):
    deadline = time.monotonic() + 120  # a bound on the test, never a verdict
    while not condition():
        assert proc.poll() is None and time.monotonic() < deadline, f"never saw {what}: {proc.stderr.read()}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("stage", ["checks", "own_tests"])
def test_an_interrupted_grading_leaves_no_scratch_folder(tmp_path, signum, stage):
    if stage == "checks":  # the candidate's child sleeps inside a call
        proc, scratch = _grading(tmp_path, SLOW_MODULE, None)
        _wait_for(lambda: any(scratch.iterdir()), proc, "a scratch folder")
        time.sleep(1.0)  # well inside the first call
    else:  # the own tests sleep: the candidate's child has ended, a tests process is running
        reference = (SOLUTIONS / "decode_mask.py").read_text()
        proc, scratch = _grading(tmp_path, reference, SLOW_TESTS)
        _wait_for(lambda: any(p.name.startswith("kvgrade-tests-") for p in scratch.iterdir()), proc,
                  "an own-tests folder")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=150)  # a signal lost in a fork hook waits for the run's end
    assert proc.returncode == 130 and "Aborted!" in err and "Traceback" not in err, err  # stopped, not finished
    assert list(scratch.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_verify_ends_its_workers_and_their_children(tmp_path, signum):
    """A stopped `kvgrade verify` went on grading every queued subject in its pool workers (minutes, with
    the terminal back): now the parent cancels them and ends each worker's grading as an interruption."""
    proc = subprocess.Popen([sys.executable, "-m", "grader", "verify", "-e", "decode_mask,tree_mask", "--seed", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
                            preexec_fn=_default_signals)
    _wait_for(lambda: any(p.name.startswith("kvgrade-verify-") for p in tmp_path.iterdir()), proc, "a grading")
    time.sleep(1.0)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)  # as a terminal sends Ctrl-C: to the workers too
    else:
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)  # a bound on the test: the whole run takes minutes
    assert proc.returncode == 130 and "Aborted!" in err and "Traceback" not in err, err
    assert "self-checks passed" not in out and "self-check failed" not in out
    _wait_for_none_in(proc.pid)  # no worker (nor child of one) is left in the run's process group
    assert list(tmp_path.iterdir()) == []


def _wait_for_none_in(group: int):
    deadline = time.monotonic() + 10  # an ended worker is reaped by init a moment after its parent exits
    while True:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        assert time.monotonic() < deadline, f"processes of group {group} outlived the run"
        time.sleep(0.2)
