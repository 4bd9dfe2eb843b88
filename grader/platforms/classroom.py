"""A GitHub Classroom starter repository: ``kvgrade start``'s workspace plus an autograding
workflow that grades every push at a fixed interview set and seed.

The workflow runs one command through GitHub's command grader, which awards its points when
the command exits 0: ``kvgrade grade . --fail-under LEVEL``. It names only the actions in
``ACTIONS``, pinned to major versions. It installs the kit from a source distribution kept in
the repository (``.kvgrade/``, pinned to the version that wrote it), unless told what to install.
"""
from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path

import jinja2

from .. import __version__
from ..workspace import start

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
KIT_FOLDER = ".kvgrade"
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
    ``install`` is what the workflow pip-installs; None: the kit's sdist, written alongside."""
    chosen = start(directory, exercise_ids)
    if install is None:
        install = f"./{KIT_FOLDER}/{_copy_sdist(Path(directory) / KIT_FOLDER)}"
    target = Path(directory) / WORKFLOW
    target.parent.mkdir(parents=True)
    target.write_text(workflow(exercise_ids, seed, fail_under, install))
    return chosen


def _copy_sdist(folder: Path) -> str:
    from .gradescope_package import build_sdist

    folder.mkdir(exist_ok=True)  # `kvgrade start` already keeps its workspace marker there
    with tempfile.TemporaryDirectory(prefix="kvgrade-classroom-") as work:
        sdist = build_sdist(Path(work))
        shutil.copyfile(sdist, folder / sdist.name)
    return sdist.name
