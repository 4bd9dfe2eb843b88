"""Folders for people who solve the exercises: a self-study workspace and a candidate bundle.

Both hold, per exercise, the prompt, the stub, the public tests and the kit's helper files,
plus a README on how to work; never a solution, a mutant, a hidden check, a rubric, a hint or
an interviewer's sheet. A workspace also holds ``.kvgrade/`` (grader/timeline.py): its logs.
"""
from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

import jinja2

from . import catalog, timeline

PYTEST_INI = "[pytest]\n# Makes this folder pytest's root, so `python -m pytest` here runs the public tests.\n"


class WorkspaceError(Exception):
    pass


def exercise_files(exercise: catalog.Exercise) -> list[Path]:
    """What a candidate may see of an exercise: prompt, stub, public tests, helper files."""
    return [exercise.prompt_path, exercise.stub_path, *exercise.public_tests, *exercise.helper_files]


def _readme(**context) -> str:
    """The workspace README (Markdown, so no HTML escaping) from its template."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "templates")),
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    return env.get_template("workspace_README.md.j2").render(**context)


def _fill(target: Path, exercise_ids: list[str] | None, kind: str, shown_path: str, command: str = ""):
    """Copy the chosen exercises into ``target`` with a README for this ``kind`` of folder:
    "workspace" (kvgrade start), "bundle" (sent to a candidate), "classroom" (a starter
    repository, graded by ``command`` on every push)."""
    chosen = [catalog.get(e) for e in exercise_ids] if exercise_ids else catalog.exercises()
    for ex in chosen:
        folder = target / ex.id
        folder.mkdir()
        for path in exercise_files(ex):
            shutil.copyfile(path, folder / path.name)
    (target / "README.md").write_text(_readme(exercises=chosen, kind=kind, path=shown_path, command=command))
    (target / "pytest.ini").write_text(PYTEST_INI)
    return chosen


def _writing(make):
    """Turn a failure to write (no such parent, not a folder, no permission) into a WorkspaceError."""
    def wrapped(path, *args, **kwargs):
        try:
            return make(path, *args, **kwargs)
        except OSError as exc:
            raise WorkspaceError(f"cannot write {path}: {exc.strerror or exc}") from None
    wrapped.__doc__, wrapped.__name__ = make.__doc__, make.__name__
    return wrapped


@_writing
def start(directory: str | Path, exercise_ids: list[str] | None = None,
          minutes: int | None = None, classroom_command: str = "") -> list[catalog.Exercise]:
    """A fresh workspace in ``directory`` (which must not exist or be empty), marked as one so
    that ``kvgrade grade`` and ``kvgrade hint`` keep their logs in it; ``minutes``: a time box.
    ``classroom_command``: a GitHub Classroom starter graded by this command on each push (its
    README says so, names no folder and offers no hints)."""
    target = Path(directory)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise WorkspaceError(f"{target} already exists and is not an empty folder; choose a new one")
    target.mkdir(exist_ok=True)
    if classroom_command:  # no session record: its start would be when staff made the template, weeks before a
        return _fill(target, exercise_ids, "classroom", ".", classroom_command)  # student's first run
    chosen = _fill(target, exercise_ids, "workspace", str(directory))
    try:
        timeline.create(target, [e.id for e in chosen], minutes)
    except timeline.LogError as exc:
        raise WorkspaceError(str(exc)) from None
    return chosen


@_writing
def bundle(out: str | Path, exercise_ids: list[str] | None = None) -> list[catalog.Exercise]:
    """What an interviewer sends a candidate: a folder, or a zip when ``out`` ends in ``.zip``."""
    out = Path(out)
    if out.exists():
        raise WorkspaceError(f"{out} already exists; choose a new name")
    if out.suffix != ".zip":
        out.mkdir()
        return _fill(out, exercise_ids, "bundle", ".")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / out.stem
        root.mkdir()
        chosen = _fill(root, exercise_ids, "bundle", ".")
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(root.parent))
    return chosen


def workspace_set(root: Path) -> list[str] | None:
    """The exercises a workspace was made with (None: not a workspace, or it names none we know)."""
    record = timeline.read_workspace(root) if Path(root).is_dir() else None
    known = {e.id for e in catalog.exercises()}
    chosen = [e for e in (record or {}).get("exercises", []) if e in known]
    return chosen or None


def keep_shown(result, seen: tuple, exercises=None) -> str | None:
    """Self-study (no ``exercises`` chosen: ``-e`` decides what is shown, a workspace's set only
    filters): keep in ``result`` only the exercises shown, ``seen`` being what ``exercises_shown``
    said of the submission. The line saying so, or None when nothing was filtered. The one rule for
    ``grade`` and ``batch``."""
    _, shown, note = seen
    if exercises or shown is None:
        return None
    result.exercises = [e for e in result.exercises if e.id in shown]
    return note or None


def exercises_shown(path: Path) -> tuple[Path | None, list[str] | None, str | None]:
    """(the workspace a self-study grading of ``path`` belongs to, the exercises to show, the line saying so).
    A workspace shows its own set; one exercise's folder of a workspace shows that exercise alone, and its
    runs are the workspace's (a newcomer graded ``ws/decode_mask`` from inside it and saw eleven others "not
    attempted", and no run logged). (None, None, None) for any other submission."""
    if Path(path).is_dir() and timeline.is_workspace(path):
        chosen = workspace_set(path)
        return path, chosen, chosen and f"showing this workspace's exercises ({', '.join(chosen)}); -e ID grades others"
    here = path.resolve() if path.is_dir() else None
    if here is not None and here.name in (workspace_set(here.parent) or ()):
        return here.parent, [here.name], (f"grading {here.name} alone, one exercise's folder of the workspace "
                                          f"{here.parent.name}; grade the workspace for all its exercises")
    return None, None, None
