"""What the room's grading process runs: the hidden checks through the engine (as ``kvgrade
grade`` does), and an exercise's public tests under pytest in the sandbox.

Each job runs in a process of its own (``run_job``: ``python -P -m grader.room.grading``, the
job as JSON on stdin, its outcome as JSON on stdout), one at a time, so pytest's state and the
sandbox's children never share the web server's process. Outcomes are plain dicts: the
server stores them as they are.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .. import catalog, own_tests
from ..result import neutral, neutralized
from ..sandbox import Limits

PUBLIC_SECONDS = 60.0  # a public test run, import included
OUTPUT_SHOWN = 6000  # characters of pytest's output the candidate sees


def write_submission(folder: Path, files: dict[str, dict[str, str]]) -> Path:
    """The candidate's files as a submission: ``folder/<id>/<name>``, readable by the server only."""
    folder.mkdir(mode=0o700, parents=True)
    for exercise, named in files.items():
        (folder / exercise).mkdir(mode=0o700)
        for name, text in named.items():
            (folder / exercise / name).write_text(text)
    return folder


def grade(folder: str, exercise_ids: list[str], seed: int) -> dict:
    """``kvgrade grade``'s grading of ``folder`` (``api.grade``), as live (an interviewer is in the
    room): the result JSON with candidate text neutralised."""
    from .. import api

    return neutralized(api.grade(folder, exercise_ids, seed=seed, live=True)).to_dict()


def public_tests(folder: str, exercise_id: str, limits: Limits | None = None) -> dict:
    """Run the exercise's public tests against the candidate's module: ``{"exit", "tests": {name: outcome},
    "output"}`` (pytest's own summary at the end). The kit's tests run in a sandboxed process of their own
    and reach the candidate's module only through the relay, as the candidate's own tests do in grading:
    so the report and the output shown come from a process no candidate code runs in (a red team's module
    rewrote its own process's JUnit file and printed "4 passed" for tests it failed)."""
    exercise = catalog.get(exercise_id)
    module = Path(folder) / exercise_id / f"{exercise_id}.py"
    ran = own_tests.run(exercise.public_tests[0], module, exercise, limits or Limits(), timeout=PUBLIC_SECONDS,
                        output_chars=OUTPUT_SHOWN)
    if ran.exit is None:
        return {"exit": None, "tests": {}, "output": f"could not run the tests: {neutral(ran.detail)}"}
    return {"exit": ran.exit, "tests": ran.tests, "output": neutral(ran.output)}


def own_tests_run(folder: str, exercise_id: str, limits: Limits | None = None) -> dict:
    """Run the candidate's own tests (``test_ID.py`` beside the module) against the candidate's module, as
    pytest in their folder would, through the same sandbox and relay as grading: ``{"exit", "tests",
    "output"}``. The tests are the candidate's code, so this report is theirs to read, never evidence."""
    exercise = catalog.get(exercise_id)
    tests = Path(folder) / exercise_id / f"test_{exercise_id}.py"
    module = Path(folder) / exercise_id / f"{exercise_id}.py"
    ran = own_tests.run(tests, module, exercise, limits or Limits(), timeout=PUBLIC_SECONDS,
                        output_chars=OUTPUT_SHOWN)
    if ran.exit is None:
        return {"exit": None, "tests": {}, "output": f"could not run the tests: {neutral(ran.detail)}"}
    return {"exit": ran.exit, "tests": ran.tests, "output": neutral(ran.output)}


JOBS = {"grade": grade, "public_tests": public_tests, "own_tests": own_tests_run}


class JobFailed(Exception):
    pass


def run_job(name: str, *args, timeout: float) -> dict:
    """Run ``JOBS[name](*args)`` in a fresh grader process; its outcome, or JobFailed."""
    package_root = str(Path(__file__).resolve().parents[2])  # a checkout works as well as an install
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run([sys.executable, "-P", "-m", "grader.room.grading"], input=json.dumps([name, args]),
                              check=False, capture_output=True, text=True, timeout=timeout, env=env, cwd=package_root)
    except subprocess.TimeoutExpired:
        raise JobFailed(f"it ran past {timeout:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise JobFailed(f"the grading process exited with status {done.returncode}: {last[:300]}")
    return json.loads(done.stdout)


if __name__ == "__main__":
    job, arguments = json.load(sys.stdin)
    answer, sys.stdout = sys.stdout, sys.stderr  # only the outcome goes to the server's pipe
    json.dump(JOBS[job](*arguments), answer)
