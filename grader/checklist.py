"""The hidden checks of an exercise by id, with what each tries, read without running anything.

A check is a top-level function ``check_<id>`` in ``grader/hidden/<id>/checks.py``; its id is
the name without the prefix, and its docstring's first paragraph says what it tries. Reading the
source (not importing it) keeps candidate code and the sandbox out of ``--check`` validation
and ``kvgrade show ID --checks``.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

GRADER_ROOT = Path(__file__).resolve().parent


ARRAY_RULES = ("leaves_arguments_unchanged", "answers_arrays_as_they_are_now", "read_only_arguments")
SCALARS = {"int", "float", "bool", "str", "None"}  # annotations (and unions of them) that no call can change


def hidden_checks(checks_py: Path, general: bool = True, stub: Path | None = None) -> dict[str, str]:
    """``{check id: what it tries (``summary``)}`` of one exercise's ``checks.py`` in the order written,
    then (with ``general``) the general rules' checks the exercise gets (``hidden/_general.py``; given its
    ``stub``, only those with something to try: :func:`general_checks`).

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
    return found | (general_checks(stub) if general else {})


def general_checks(stub: Path | None = None) -> dict[str, str]:
    """The general rules' checks, run after every exercise's own: they sit under no rubric
    criterion and cap by their failure kind alone. Given an exercise's ``stub``, those with something to try
    there: the rules about array and list arguments (``ARRAY_RULES``) leave out an exercise that takes
    scalars only (decode_mask: two ints), where they could only pass, and would be counted, shown and
    awarded points as if they had judged something. Show, plugin and progress all read this one list."""
    found = dict(_general_docs())
    if stub is not None and takes_scalars_only(stub):
        found = {rule: said for rule, said in found.items() if rule not in ARRAY_RULES}
    return found


@functools.cache
def _general_docs() -> tuple:
    tree = ast.parse((GRADER_ROOT / "hidden" / "_general.py").read_text())
    return tuple((node.name.removeprefix("check_"), summary(ast.get_docstring(node))) for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name.startswith("check_"))


@functools.cache
def takes_scalars_only(stub: Path) -> bool:
    """Whether every parameter of every function and method in the stub is annotated with scalars only (int,
    float, bool, str, None, and unions of them). One unannotated, or any other type, may be an array or a list."""
    for node in ast.walk(ast.parse(Path(stub).read_text())):
        if not isinstance(node, ast.FunctionDef):
            continue
        a = node.args
        if a.vararg or a.kwarg:
            return False
        for param in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            if param.arg in ("self", "cls"):
                continue
            if param.annotation is None:
                return False
            named = {n.id for n in ast.walk(param.annotation) if isinstance(n, ast.Name)}
            named |= {repr(n.value) for n in ast.walk(param.annotation) if isinstance(n, ast.Constant)}
            if not named or not named <= SCALARS:
                return False
    return True


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
