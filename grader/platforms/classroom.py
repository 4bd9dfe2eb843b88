"""A GitHub Classroom starter repository: ``kvgrade start``'s workspace plus an autograding
workflow that grades every push at a fixed interview set (and a fresh seed, unless one is given).

The workflow runs one command through GitHub's command grader, which awards its points when
the command exits 0: ``kvgrade grade . --fail-under LEVEL``. It names only the actions in
``ACTIONS``, pinned to major versions. Before grading it installs, at run time, the grader-only
build (``grader_only``: no references, mutants, variants, sheets or hints) from where the
instructor published it: ``install``, a pinned requirement. Nothing of the kit is committed
into the starter. Grading runs in the student's repository, so whatever grades there the
student can read: classroom grading is never secret (confidential grading: Gradescope, batch).
"""
from __future__ import annotations

import shlex
from pathlib import Path

import jinja2

from .. import __version__
from ..workspace import start
from .gradescope_package import PackageError

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
ACTIONS = {
    "checkout": "actions/checkout@v4",
    "python": "actions/setup-python@v5",
    "grader": "classroom-resources/autograding-command-grader@v1",
    "reporter": "classroom-resources/autograding-grading-reporter@v1",
}
MAX_SCORE = 100
TIMEOUT_MINUTES = 20


def grading_command(exercise_ids: list[str] | None, seed: int | None, fail_under: str) -> str:
    """The shell command the workflow runs in the student's repository (without a seed, each
    run draws a fresh one)."""
    words = ["kvgrade", "grade", "."]
    for exercise_id in exercise_ids or []:
        words += ["-e", exercise_id]
    words += ["--seed", str(seed)] if seed is not None else []
    words += ["--fail-under", fail_under]
    return shlex.join(words)


def workflow(exercise_ids: list[str] | None, seed: int | None, fail_under: str, install: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent.parent / "templates")),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return env.get_template("classroom.yml.j2").render(
        version=__version__, fail_under=fail_under, actions=ACTIONS, timeout_minutes=TIMEOUT_MINUTES,
        max_score=MAX_SCORE, setup=f"pip install {shlex.quote(install)}",
        command=grading_command(exercise_ids, seed, fail_under))


def write_starter(directory: str | Path, exercise_ids: list[str] | None, seed: int | None, fail_under: str,
                  install: str | None = None):
    """The workspace in ``directory`` (new or empty) with the workflow; the exercises chosen.
    ``install`` is what the workflow pip-installs: the grader-only build, pinned (PackageError
    otherwise, before anything is written)."""
    _check_pinned(install)
    chosen = start(directory, exercise_ids, classroom_command=grading_command(exercise_ids, seed, fail_under))
    target = Path(directory) / WORKFLOW
    target.parent.mkdir(parents=True)
    target.write_text(workflow(exercise_ids, seed, fail_under, install))
    return chosen


_HEX = set("0123456789abcdef")


def _check_pinned(install: str | None):
    """A requirement that names one build: ``name==version``, a URL with ``#sha256=``, or a VCS
    URL at a full commit. Never a local path: the starter would have to carry the file."""
    if not install:
        raise PackageError("give --install SPEC: where you published the grader-only build "
                           "(python -m grader.platforms.grader_only OUT_DIR writes it), pinned")
    spec = install.strip()
    commit = spec.rsplit("@", 1)[-1].split("#", 1)[0] if spec.startswith("git+") and "@" in spec[4:] else ""
    pinned = (("==" in spec and "://" not in spec and not spec.startswith((".", "/")))
              or ("://" in spec and "#sha256=" in spec) or (len(commit) == 40 and set(commit) <= _HEX))
    if not pinned:
        raise PackageError(f"--install {install[:200]!r} is not pinned: give name==VERSION, a URL ending in "
                           "#sha256=DIGEST, or git+https://...@COMMIT (40 hex digits)")
