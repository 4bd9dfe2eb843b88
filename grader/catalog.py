"""The one place that knows what an exercise is made of.

An exercise ``<id>`` is the folder ``exercises/<id>/`` (prompt, stub, public tests, helper
files), ``rubrics/<id>.toml``, the reference ``solutions/<id>.py``, known-wrong versions in
``solutions/mutants/<id>/``, and hidden checks in the package ``grader/hidden/<id>/``.
Exercises are discovered from ``exercises/``; no code lists them.
"""
from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from . import rubric
from .checklist import hidden_checks
from .rubric import Rubric

# A checkout keeps the kit's data beside the package; an installed wheel carries it inside, as
# grader/kit/ (setup.py copies it there).
_PACKAGE = Path(__file__).resolve().parent
KIT_ROOT = _PACKAGE / "kit" if (_PACKAGE / "kit" / "exercises").is_dir() else _PACKAGE.parent
HIDDEN_ROOT = Path(__file__).resolve().parent / "hidden"


class CatalogError(Exception):
    """The kit itself is incomplete or inconsistent (not the candidate's fault)."""


@dataclass(frozen=True)
class Mutant:
    """A known-wrong solution and the diagnosis it must draw.

    A file ``<name>.py`` replaces the exercise module; a folder ``<name>/`` is a whole
    submission for the exercise (e.g. a correct module with weak tests of its own).
    The expected diagnosis is the module constant ``EXPECTED_DIAGNOSIS``.
    """

    exercise: str
    name: str
    path: Path
    expected_diagnosis: str | tuple  # a tuple: a mutant with several mistakes draws every one;
    #                                  () : a mistake no diagnosis may name (its verdict alone shows it)
    expected_level: str | None = None  # the level it must not exceed, when no diagnosis gives it

    @property
    def expected_diagnoses(self) -> tuple:
        d = self.expected_diagnosis
        return tuple(d) if isinstance(d, (tuple, list)) else (d,)

    @property
    def module_path(self) -> Path:
        return self.path / f"{self.exercise}.py" if self.path.is_dir() else self.path


@dataclass(frozen=True)
class Exercise:
    id: str
    folder: Path

    @property
    def prompt_path(self) -> Path:
        return self.folder / "README.md"

    @property
    def stub_path(self) -> Path:
        return self.folder / f"{self.id}.py"

    @property
    def title(self) -> str:
        return self.rubric.title

    @property
    def public_tests(self) -> list[Path]:
        return sorted(self.folder.glob("test_*.py"))

    @property
    def helper_files(self) -> list[Path]:
        """Kit files the candidate's module may import (e.g. ``gpt2.py``): every other ``.py``."""
        return sorted(p for p in self.folder.glob("*.py")
                      if p.name != self.stub_path.name and not p.name.startswith("test_"))

    @property
    def reference_path(self) -> Path:
        return KIT_ROOT / "solutions" / f"{self.id}.py"

    @property
    def rubric_path(self) -> Path:
        return KIT_ROOT / "rubrics" / f"{self.id}.toml"

    @property
    def hidden_package(self) -> Path:
        return HIDDEN_ROOT / self.id

    @property
    def hidden_checks(self) -> Path:
        return self.hidden_package / "checks.py"

    @cached_property
    def rubric(self) -> Rubric:
        """The exercise's rubric, validated as it loads (a ``CatalogError`` names the problem)."""
        try:
            return rubric.load(self.rubric_path)
        except rubric.RubricError as exc:
            raise CatalogError(f"rubric {self.rubric_path}: {exc}") from None

    @cached_property
    def checks(self) -> dict[str, str]:
        """``{hidden check id: what it tries}``, in order, read without importing the checks."""
        return hidden_checks(self.hidden_checks, stub=self.stub_path)

    @cached_property
    def check_ids(self) -> set[str]:
        """The exercise's own check ids, which its rubric places; the general rules' checks cap by kind alone."""
        return set(hidden_checks(self.hidden_checks, general=False))

    @cached_property
    def mutants(self) -> list[Mutant]:
        folder = KIT_ROOT / "solutions" / "mutants" / self.id
        found = []
        for path in sorted(folder.glob("*")):
            if path.name.startswith(("_", ".")) or not (path.is_dir() or path.suffix == ".py"):
                continue
            sources = sorted(path.glob("*.py")) if path.is_dir() else [path]
            said = (module_constant(p, "EXPECTED_DIAGNOSIS") for p in sources)
            expected = next((d for d in said if d is not None), None)
            if expected is None:
                raise CatalogError(f"mutant {path} does not say EXPECTED_DIAGNOSIS")
            level = next(filter(None, (module_constant(p, "EXPECTED_LEVEL") for p in sources)), None)
            found.append(Mutant(self.id, path.stem, path, expected, level))
        return found

    @cached_property
    def correct_variants(self) -> list[Path]:
        """Correct answers written differently (``solutions/variants/<id>/*.py``): each must pass."""
        folder = KIT_ROOT / "solutions" / "variants" / self.id
        return sorted(p for p in folder.glob("*.py") if not p.name.startswith(("_", ".")))

    def mutant(self, name: str) -> Mutant:
        """The known-wrong version in one file ``solutions/mutants/<id>/<name>.py`` (e.g. for grading
        candidate tests, which the rubric's [own_tests] names)."""
        for m in self.mutants:
            if m.name == name and m.path.is_file():
                return m
        raise CatalogError(f"{self.id} has no known-wrong version in one file named {name!r}")


def module_constant(path: Path, name: str):
    """Read a literal module constant without running the file."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def exercises() -> list[Exercise]:
    root = KIT_ROOT / "exercises"
    return [Exercise(p.name, p) for p in sorted(root.iterdir())
            if p.is_dir() and (p / "README.md").exists() and not p.name.startswith((".", "_"))]


def get(exercise_id: str) -> Exercise:
    for ex in exercises():
        if ex.id == exercise_id:
            return ex
    known = ", ".join(e.id for e in exercises())
    raise KeyError(f"unknown exercise {exercise_id!r}; known: {known}")


def reference_submission(into: Path) -> Path:
    """Fill the folder ``into`` with every reference module and the references' own tests."""
    for ex in exercises():
        if ex.reference_path.exists():
            shutil.copyfile(ex.reference_path, into / ex.reference_path.name)
        own = ex.reference_path.with_name(f"test_{ex.id}.py")
        if own.exists():
            shutil.copyfile(own, into / own.name)
    return into
