"""``kvgrade new ID``: every part of a new exercise, from a small working template
(``grader/templates/new_exercise/``): prompt, stub and public test; reference, a mutant and a
correct variant; rubric; hidden checks and oracle; the oracle's own test. Each file says what
to replace; ``tests/test_codebase_scaffold.py`` grades the template, so it stays a working
exercise that the catalog, the rubric calibration and ``verify`` accept."""
from __future__ import annotations

import re
from pathlib import Path

from . import catalog

TEMPLATE = Path(__file__).resolve().parent / "templates" / "new_exercise"
PLACEHOLDER = "{id}"
SUFFIX = ".tmpl"  # a template is not Python until its id is filled in: no tool parses it as such


class ScaffoldError(Exception):
    """The id is unusable or taken, or there is no checkout to write into; ``str()`` says which."""


def files(exercise_id: str) -> dict[Path, str]:
    """``{path relative to the kit's root: text}`` of a new exercise ``exercise_id``."""
    return {Path(str(p.relative_to(TEMPLATE)).replace(PLACEHOLDER, exercise_id).removesuffix(SUFFIX)):
            p.read_text().replace(PLACEHOLDER, exercise_id)
            for p in sorted(TEMPLATE.rglob("*")) if p.is_file()}


def new_exercise(exercise_id: str, kit_root: Path | None = None) -> list[Path]:
    """Write a new exercise into ``kit_root`` (default: this checkout); the paths written."""
    root = Path(kit_root or catalog.KIT_ROOT)
    if not re.fullmatch(r"[a-z][a-z0-9_]*", exercise_id):
        raise ScaffoldError(f"{exercise_id!r} is not an exercise id: lower-case letters, digits and _, "
                            "starting with a letter (it is also the module's name)")
    if not (root / "grader" / "hidden").is_dir():
        raise ScaffoldError(f"{root} is not a kvgrade checkout (no grader/hidden/): clone the repository to add "
                            "an exercise")
    planned = {root / rel: text for rel, text in files(exercise_id).items()}
    taken = [p for p in planned if p.exists()] + [p for p in (root / "exercises" / exercise_id,) if p.exists()]
    if taken:
        raise ScaffoldError(f"{exercise_id} exists already: {taken[0]}")
    for path, text in planned.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(planned)
