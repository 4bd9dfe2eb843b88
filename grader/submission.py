"""Where a submission keeps each exercise, and which of its files the child may see."""
from __future__ import annotations

from pathlib import Path

MAX_FILE_BYTES = 1 << 20
MAX_FILES = 50


class SubmissionError(Exception):
    """The submission path itself is unusable (missing, not a folder, unreadable, empty)."""


def check_root(root: Path) -> Path:
    if not root.exists():
        raise SubmissionError(f"{root} does not exist")
    if not root.is_dir():
        raise SubmissionError(f"{root} is not a folder; a submission is a folder of modules")
    try:
        empty = next(root.iterdir(), None) is None
    except OSError as exc:
        raise SubmissionError(f"{root} cannot be read: {exc.strerror}") from None
    if empty:
        raise SubmissionError(f"{root} is empty; a submission holds <id>/<id>.py or <id>.py "
                              "for each exercise attempted")
    return root


def locate(root: Path, exercise_id: str) -> Path | None:
    """``<root>/<id>/<id>.py``, or else ``<root>/<id>.py``; None when neither exists."""
    for path in (root / exercise_id / f"{exercise_id}.py", root / f"{exercise_id}.py"):
        if path.is_file():
            return path
    return None


def candidate_files(module: Path, other_modules: dict[str, Path]) -> list[tuple[str, Path]]:
    """The files copied beside the candidate's module in the child.

    Every ``.py`` in the module's folder (its own helpers), then the submission's modules of
    the other exercises by their ids, so a fused kernel may import the candidate's own tile
    classification whichever layout the submission uses. Tests are left out; so are files
    over 1 MiB. The module itself comes last so nothing shadows it.
    """
    files = [(p.name, p) for p in sorted(module.parent.glob("*.py"))
             if not p.name.startswith("test_") and p != module and p.stat().st_size <= MAX_FILE_BYTES]
    files = files[:MAX_FILES]
    files += [(f"{eid}.py", path) for eid, path in sorted(other_modules.items()) if path != module]
    files.append((module.name, module))
    return files
