"""The hidden checks of an exercise by id, with what each tries, read without running anything.

A check is a top-level function ``check_<id>`` in ``grader/hidden/<id>/checks.py``; its id is
the name without the prefix, and its docstring's first line says what it tries. Reading the
source (not importing it) keeps candidate code and the sandbox out of ``--check`` validation
and ``kvgrade show ID --checks``.
"""
from __future__ import annotations

import ast

from .catalog import Exercise


def hidden_checks(exercise: Exercise) -> dict[str, str]:
    """``{check id: first docstring line}`` in the order the checks are written."""
    tree = ast.parse(exercise.hidden_checks.read_text())
    return {node.name.removeprefix("check_"): _first_line(ast.get_docstring(node))
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("check_")}


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0] if lines else ""
