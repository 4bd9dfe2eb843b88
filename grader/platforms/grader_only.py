"""A grader-only build of the kit, for grading where students can read the grader (GitHub Classroom).

It holds what grading needs: the grader, the hidden checks and their oracles, the exercises
(prompts, stubs, public tests, helper modules) and each rubric's levels, criteria and
diagnoses. It holds no reference solutions, known-wrong versions or correct variants
(``solutions/`` holds only a note), and the rubrics lose the interviewer's material: hints, checkpoints,
telltales and follow-up questions. Its distribution name is ``kvgrade-grader`` (the same
version and the same ``kvgrade`` command), so a pinned requirement never fetches the full kit.

What it cannot judge, the result says: the candidate's own tests (scored against the reference
and the known-wrong versions) become criteria to observe, and a check that breaks unexpectedly
gives no level instead of being blamed on anyone (``own_tests.rubric_for``, ``engine._blame``).
The hidden checks' oracles are still right answers: a classroom build is never secret.

Run as ``python -m grader.platforms.grader_only OUT_DIR``; publish the file it writes where the
workflow can ``pip install`` it, pinned (an index with ``kvgrade-grader==VERSION``, or a URL
with ``#sha256=``).
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

from .. import __version__
from .gradescope_package import PackageError, build_sdist

NAME = "kvgrade-grader"
INTERVIEWER_ONLY = ("hints", "checkpoints", "telltales", "follow_ups")  # rubric keys left out
ANSWER_FOLDERS = ("solutions",)  # references, mutants/, variants/, the reference's own tests


def build(out: str | Path) -> Path:
    """Write the grader-only source distribution into the folder ``out``; returns its path."""
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="kvgrade-grader-only-") as work:
        sdist = build_sdist(Path(work), prepare=strip)
        target = out / sdist.name
        shutil.copyfile(sdist, target)
    return target


def strip(source: Path):
    """Turn a copy of the kit's source into the grader-only one, in place."""
    for name in ANSWER_FOLDERS:
        shutil.rmtree(source / name)
        (source / name).mkdir()  # setup.py copies it into the package; an sdist drops an empty folder
        (source / name / "README.md").write_text(f"The grader-only build ({NAME}) holds no {name}.\n")
    for path in sorted((source / "rubrics").iterdir()):  # the format's guide quotes a rubric's sheet: left out
        if path.suffix == ".toml":
            path.write_text(_rubric_for_grading(path))
        else:
            path.unlink()
    project = source / "pyproject.toml"
    text = project.read_text()
    if text.count('\nname = "kvgrade"\n') != 1:
        raise PackageError("pyproject.toml names the project in a way the grader-only build does not recognise")
    project.write_text(text.replace('\nname = "kvgrade"\n', f'\nname = "{NAME}"\n'))


def _rubric_for_grading(path: Path) -> str:
    """The rubric without what only an interviewer reads (``follow_ups`` stays, empty: it is required)."""
    data = tomllib.loads(path.read_text())
    kept = {key: value for key, value in data.items() if key not in INTERVIEWER_ONLY}
    kept["follow_ups"] = []
    text = _toml(kept)
    if tomllib.loads(text) != kept:  # the writer below covers the subset rubrics use; never guess
        raise PackageError(f"{path.name} holds TOML the grader-only build cannot rewrite")
    return text


def _toml(data: dict) -> str:
    """TOML for a rubric's shapes: scalars and lists of scalars, tables, arrays of tables."""
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    arrays = {k: v for k, v in data.items() if isinstance(v, list) and v and all(isinstance(i, dict) for i in v)}
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if k not in tables and k not in arrays]
    for key, table in tables.items():
        lines += ["", f"[{_key(key)}]", *(f"{_key(k)} = {_value(v)}" for k, v in table.items())]
    for key, items in arrays.items():
        for item in items:
            lines += ["", f"[[{_key(key)}]]", *(f"{_key(k)} = {_value(v)}" for k, v in item.items())]
    return "\n".join(lines) + "\n"


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise PackageError(f"a rubric value of type {type(value).__name__} cannot be written")


USAGE = "usage: python -m grader.platforms.grader_only OUT_DIR"
HELP = (f"{USAGE}\n\n  Build {NAME}, the grader without references, known-wrong versions or interviewer texts, as an\n"
        "  sdist in OUT_DIR (made when missing; its parent must exist), for a GitHub Classroom workflow to\n"
        "  install (kvgrade classroom --install).")


def main(argv: list[str]) -> int:
    """The README's rule for output paths: OUT_DIR's parent must exist; OUT_DIR is made when missing. Errors
    are one line, as the CLI's: ``Error: ...``, exit 2."""
    if argv in (["-h"], ["--help"]):
        print(HELP)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):  # an option is never a folder name (`--help/` was built)
        problem = f"no such option: {argv[0]}" if argv and argv[0].startswith("-") else "give one OUT_DIR"
        print(f"{USAGE}\nError: {problem}", file=sys.stderr)
        return 2
    out = Path(argv[0])
    try:
        if not out.is_dir():
            out.mkdir()  # never its parents: a typo is an error, not a new folder tree
        built = build(out)
    except OSError as exc:
        print(f"Error: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except PackageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    print(f"{NAME} {__version__}: {built} (publish it, then: kvgrade classroom DIR --install "
          f"'{NAME}=={__version__}' or a URL to it with #sha256=...)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
