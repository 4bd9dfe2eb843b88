"""The hidden checks of an exercise by id, with what each tries, read without running anything.

A check is a top-level function ``check_<id>`` in ``grader/hidden/<id>/checks.py``; its id is
the name without the prefix, and its docstring's first paragraph says what it tries. Reading the
source (not importing it) keeps candidate code and the sandbox out of ``--check`` validation
and ``kvgrade show ID --checks``.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER_ROOT = Path(__file__).resolve().parent


def hidden_checks(checks_py: Path, general: bool = True) -> dict[str, str]:
    """``{check id: what it tries (``summary``)}`` of one exercise's ``checks.py`` in the order written,
    then (with ``general``) the general rules' checks every exercise gets (``hidden/_general.py``).

    A check is defined there (``def check_x``) or shared: ``check_x = module.check_x`` with
    ``module`` imported from the grader (``from grader import own_tests``), read from that
    module's source in turn.
    """
    tree = ast.parse(Path(checks_py).read_text())
    imported = {alias.asname or alias.name: f"{node.module}.{alias.name}"
                for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "grader"
                for alias in node.names}
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("check_"):
            found[node.name.removeprefix("check_")] = summary(ast.get_docstring(node))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.startswith("check_"):
            found[node.targets[0].id.removeprefix("check_")] = _shared_doc(node.value, imported)
    return found | (general_checks() if general else {})


def general_checks() -> dict[str, str]:
    """The general rules' checks, run after every exercise's own: they sit under no rubric
    criterion and cap by their failure kind alone."""
    tree = ast.parse((GRADER_ROOT / "hidden" / "_general.py").read_text())
    return {node.name.removeprefix("check_"): summary(ast.get_docstring(node)) for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")}


def _shared_doc(value: ast.expr, imported: dict[str, str]) -> str:
    """What ``module.function`` in a grader module tries (``summary``), read from its source."""
    if not (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in imported):
        return ""
    source = GRADER_ROOT.joinpath(*imported[value.value.id].split(".")[1:]).with_suffix(".py")
    if not source.is_file():
        return ""
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == value.attr:
            return summary(ast.get_docstring(node))
    return ""


def summary(doc: str | None) -> str:
    """What a check tries, from its docstring: the first paragraph on one line (its first sentence
    may run over several lines of source)."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())
