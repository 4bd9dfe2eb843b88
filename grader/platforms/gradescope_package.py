"""A Gradescope autograder zip, and what runs inside it for every submission.

The zip holds ``setup.sh`` (installs the kit from the source distribution in the zip, pinned to the version
that built it), ``run_autograder`` (grades ``$AUTOGRADER_ROOT/submission``, default
``/autograder``, into ``results/results.json``), that source distribution, and ``kvgrade-autograder.json``
(the interview set, the seed, whether levels are shown). Gradescope unpacks the zip into
``/autograder/source`` and copies ``run_autograder`` to ``/autograder``; see its autograder
specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

Run as ``python -m grader.platforms.gradescope_package ROOT`` by ``run_autograder``, and with
``--lock ROOT`` by ``setup.sh``: submissions run under fresh uids, so everything under the root
that holds answers becomes root's alone (:func:`lock`).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import jinja2

from .. import __version__, catalog

CONFIG = "kvgrade-autograder.json"
SCRIPTS = ("setup.sh", "run_autograder")
_SOURCE_IGNORED = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".venv",
                                         "kvgrade-batch", "*.pyc")


class PackageError(Exception):
    """The autograder cannot be built here (one line, for the CLI)."""


def build(out: str | Path, exercise_ids: list[str] | None, seed: int | None, show_levels: bool = False,
          after_published: bool = False) -> Path:
    """Write the autograder zip to ``out``; returns it. ``seed`` None: a fresh seed for each submission
    (a fixed one, shown in every result, would let a student tabulate answers for the next try)."""
    out = Path(out)
    config = {"kvgrade": __version__, "exercises": list(exercise_ids or []), "seed": seed,
              "show_levels": show_levels, "tests_visibility": "after_published" if after_published else "visible"}
    with tempfile.TemporaryDirectory(prefix="kvgrade-autograder-") as work:
        package = build_sdist(Path(work))
        files = {name: _script(name, package.name) for name in SCRIPTS}
        files[CONFIG] = json.dumps(config, indent=2) + "\n"
        partial = out.with_name(out.name + ".partial")
        try:
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
                for name, text in files.items():
                    info = zipfile.ZipInfo(name)
                    info.external_attr = (0o100755 if name in SCRIPTS else 0o100644) << 16
                    zf.writestr(info, text)
                zf.write(package, package.name)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    return out


def build_sdist(work: Path, prepare=None) -> Path:
    """A source distribution of this kit (its exercises/, rubrics/ and solutions/ included),
    built offline from a copy of the source checkout, so the checkout gets no build files.
    An sdist, not a wheel: building a wheel here would need the ``wheel`` package.
    ``prepare(source)`` may change the copy first (see ``grader_only``)."""
    if not (catalog.KIT_ROOT / "setup.py").is_file():
        raise PackageError(f"the kit at {catalog.KIT_ROOT} is installed, not a source checkout: build the "
                           f"autograder from a clone of kvgrade's repository")
    source = work / "source"
    shutil.copytree(catalog.KIT_ROOT, source, ignore=_SOURCE_IGNORED)
    if prepare is not None:
        prepare(source)
    built = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--formats=gztar", "-d", str(work / "dist")],
                           cwd=source, capture_output=True, text=True, timeout=600)
    found = sorted((work / "dist").glob("*.tar.gz"))
    if built.returncode != 0 or len(found) != 1:
        last = (built.stderr.strip().splitlines() or ["nothing was built"])[-1][:200]
        raise PackageError(f"building the kit's source distribution failed: {last}")
    return found[0]


def _script(name: str, package: str) -> str:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent.parent / "templates")),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    return env.get_template(f"{name}.j2").render(version=__version__, package=package)


# -- inside the autograder: one submission ------------------------------------------------------

def submission_path(folder: Path) -> Path:
    """What to grade: the folder, or the one zip it holds when it holds nothing else
    (Gradescope keeps an uploaded zip as a file when the student zips a zip). A link named like a
    zip is not one: it would have root read a file outside the submission."""
    entries = [p for p in folder.iterdir() if not p.name.startswith(".")] if folder.is_dir() else []
    if len(entries) == 1 and stat.S_ISREG(entries[0].lstat().st_mode) and entries[0].suffix.lower() == ".zip":
        return entries[0]
    return folder


def results_for(root: Path) -> dict:
    """Grade ``root/submission`` as ``root/source``'s config says; Gradescope's results.json.

    A submission that cannot be graded (no module, a broken zip) is the student's: a score of 0
    with the reason. Missing isolation is the staff's: it raises, so Gradescope reports a failed
    autograder instead of running student code unprotected. The config chooses the exercises: a
    workspace record in an upload is the student's and filters nothing, and no run is logged into
    the upload (``engine.grade``, not ``api.grade``).
    """
    from ..engine import grade
    from ..render import gradescope
    from ..render.formats import shown
    from ..sandbox.isolation import require_isolation
    from ..submission import SubmissionError

    config = json.loads((root / "source" / CONFIG).read_text())
    require_isolation(trust=False)
    path = submission_path(root / "submission")
    try:
        result = grade(path, config["exercises"] or None, seed=config["seed"])
    except SubmissionError as exc:  # the student's upload by its own name, not the autograder's folder
        why = str(exc).replace(str(path), path.name)
        return {"score": 0.0, "output": f"Your submission could not be graded: {why}", "visibility": "visible",
                "stdout_visibility": "hidden", "tests": []}
    data = gradescope.render(shown(result, "summary", config["show_levels"]))
    for test in data["tests"]:
        test["visibility"] = config["tests_visibility"]
    return data


# -- after setup: nothing a fresh uid can read holds answers -------------------------------------

VENV = "kvgrade-venv"
INSTALLED_SECRETS = ("kit", "hidden")  # in the installed grader package: references, mutants, rubrics; hidden checks


def private_paths(root: Path) -> list[Path]:
    """What holds answer material under the autograder root: the zip's own files (the kit's
    source distribution among them), and the installed kit's data and hidden checks."""
    installed = sorted(root.glob(f"{VENV}/lib/python3*/site-packages/grader"))
    return [root / "source", *(package / name for package in installed for name in INSTALLED_SECRETS)]


def lock(root: Path) -> list[Path]:
    """Make each of :func:`private_paths` readable by root alone (the grader runs as root; the
    children never import the grader package, and the rest of the venv stays readable for
    them: its Python, numpy, pytest). Returns what was locked."""
    locked = [path for path in private_paths(root) if path.is_dir()]
    for path in locked:
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                full = os.path.join(dirpath, name)
                if not os.path.islink(full):
                    os.chmod(full, os.stat(full).st_mode & 0o700)
        os.chmod(path, 0o700)
    return locked


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--lock":
        locked = lock(Path(argv[1]))
        print(f"kvgrade {__version__}: readable by root only: {', '.join(str(p) for p in locked)}")
        return 0
    if len(argv) != 1:
        print("usage: python -m grader.platforms.gradescope_package [--lock] AUTOGRADER_ROOT", file=sys.stderr)
        return 2
    from ..sandbox.isolation import IsolationError

    root = Path(argv[0])
    try:
        data = results_for(root)
    except IsolationError as exc:  # the staff's to fix; Gradescope shows them this output
        print(f"kvgrade autograder: {exc}", file=sys.stderr)
        return 1
    target = root / "results" / "results.json"
    partial = target.with_name("results.json.partial")
    partial.write_text(json.dumps(data, indent=2))
    os.replace(partial, target)
    print(f"kvgrade {__version__}: score {data['score']} written to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
