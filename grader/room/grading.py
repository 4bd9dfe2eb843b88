"""What the room's grading process runs: the hidden checks through the engine (as ``kvgrade
grade`` does), and an exercise's public tests under pytest in the sandbox.

Each job runs in a process of its own (``run_job``: ``python -P -m grader.room.grading``, the
job as JSON on stdin, its outcome as JSON on stdout), one at a time, so pytest's state and the
sandbox's children never share the web server's process. Outcomes are plain dicts: the
server stores them as they are.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

from .. import catalog
from ..own_tests import JUNIT, read_junit
from ..render.common import neutral, neutralized
from ..sandbox import Limits
from ..sandbox.launch import Scratch, kill, spawn

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
    """The engine's grading of ``folder``, as live (an interviewer is in the room): the result
    JSON with candidate text neutralised. The one adapter to the engine: the ``live`` keyword
    is passed where the engine has it."""
    from .. import engine

    live = {"live": True} if "live" in inspect.signature(engine.grade).parameters else {}
    result = neutralized(engine.grade(folder, exercise_ids, seed=seed, **live))
    return result.to_dict()


def public_tests(folder: str, exercise_id: str, limits: Limits | None = None) -> dict:
    """Run the exercise's public tests against the candidate's module, in the sandbox:
    ``{"exit", "tests": {name: outcome}, "output"}`` (pytest's own summary at the end)."""
    exercise = catalog.get(exercise_id)
    limits = limits or Limits()
    scratch = Scratch(prefix="kvgrade-room-")
    child = None
    try:
        module = Path(folder) / exercise_id / f"{exercise_id}.py"
        scratch.add_files("work", [(module.name, module), *exercise.helper_files, *exercise.public_tests])
        (scratch.work / "pytest.ini").write_text("[pytest]\n")
        child = spawn(["-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={scratch.root / JUNIT}",
                       *(p.name for p in exercise.public_tests)], scratch, limits)
        try:
            code = child.wait(timeout=PUBLIC_SECONDS)
        except subprocess.TimeoutExpired:
            return {"exit": None, "tests": {}, "output": f"stopped: the tests ran past {PUBLIC_SECONDS:g} s"}
        kill(child)
        return {"exit": code, "tests": read_junit(scratch), "output": neutral(scratch.output_tail(OUTPUT_SHOWN))}
    except OSError as exc:
        return {"exit": None, "tests": {}, "output": f"could not run the tests: {exc.strerror or exc}"}
    finally:
        kill(child)
        scratch.remove()


JOBS = {"grade": grade, "public_tests": public_tests}


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
