"""Guardrails for the next contributor: every exercise has the parts that keep it honest
(mutants, correct variants, an oracle test), the README's counts follow the tree, no two
modules import each other, and lint stays clean."""
import ast
import re
from pathlib import Path

import pytest

from grader import catalog

KIT = catalog.KIT_ROOT
EXERCISES = catalog.exercises()
README = (KIT / "README.md").read_text()


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.id for e in EXERCISES])
def test_every_exercise_has_mutants_correct_variants_and_an_oracle_test(ex):
    assert ex.mutants, f"{ex.id}: no known-wrong solution in solutions/mutants/{ex.id}/"
    assert ex.correct_variants, f"{ex.id}: no correct variant in solutions/variants/{ex.id}/"
    assert (KIT / "tests" / f"test_{ex.id}_oracle.py").is_file(), f"{ex.id}: no tests/test_{ex.id}_oracle.py"
    assert ex.rubric.time_box_minutes, f"{ex.id}: no time_box_minutes in its rubric (kvgrade list shows it)"


def test_the_readme_counts_follow_the_tree():
    rows = re.findall(r"^\| `(\w+)` \| ", README.split("## The exercises", 1)[1].split("\n## ", 1)[0], re.M)
    assert rows == [e.id for e in EXERCISES] or sorted(rows) == sorted(e.id for e in EXERCISES), rows
    mutants = sum(len(e.mutants) for e in EXERCISES)
    variants = sum(len(e.correct_variants) for e in EXERCISES)
    stated = re.search(r"one known-wrong version per classic mistake \((\d+) in all", README)
    assert stated and int(stated.group(1)) == mutants, f"the README says {stated and stated.group(1)}; {mutants}"
    stated = re.search(r"correct answers written\s+differently \((\d+):", README)
    assert stated and int(stated.group(1)) == variants, f"the README says {stated and stated.group(1)}; {variants}"


def _imports(path: Path, names: set[str]) -> set[str]:
    """The grader modules ``path`` imports (relative or absolute, at any depth of the file)."""
    me = ".".join(path.relative_to(KIT).with_suffix("").parts).removesuffix(".__init__")
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != me and not me.startswith(target + "."):  # not itself or its package
                found.add(target)
    return found


def test_no_two_modules_import_each_other():
    """Dependencies run one way: what two modules both need lives below both."""
    files = sorted((KIT / "grader").rglob("*.py"))
    names = {".".join(f.relative_to(KIT).with_suffix("").parts).removesuffix(".__init__") for f in files}
    graph = {".".join(f.relative_to(KIT).with_suffix("").parts).removesuffix(".__init__"): _imports(f, names)
             for f in files}
    packages = {n for n in names if any(m.startswith(n + ".") for m in names)}  # an __init__ re-exports

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [m for m in graph[start] if m not in packages]
        while todo:
            module = todo.pop()
            if module == goal:
                return True
            if module not in seen:
                seen.add(module)
                todo += [m for m in graph.get(module, ()) if m not in packages]
        return False
    circles = sorted(f"{a} <-> {b}" for a in graph if a not in packages for b in graph[a]
                     if b not in packages and a < b and reaches(b, a))
    assert not circles, circles


@pytest.mark.parametrize("ex", EXERCISES, ids=[e.id for e in EXERCISES])
def test_a_checks_module_measures_memory_exactly_when_it_says_so(ex):
    """Only an exercise that measures memory gets the kit-only floor child and a collection in the
    candidate's child before each check (the plugin's ``measures_memory``): a module that says
    ``MEASURES_MEMORY = False`` calls ``measure`` with ``memory=False`` only (``measure`` refuses
    the other at run time too)."""
    tree = ast.parse(ex.hidden_checks.read_text())
    said = [n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
            and any(isinstance(t, ast.Name) and t.id == "MEASURES_MEMORY" for t in n.targets)]
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
             and n.func.id == "measure"]
    memory = [c for c in calls if not any(k.arg == "memory" and isinstance(k.value, ast.Constant)
                                          and k.value.value is False for k in c.keywords)]
    if said == [False]:
        assert calls and not memory, f"{ex.id} says MEASURES_MEMORY = False but measures memory " \
                                     f"at lines {[c.lineno for c in memory]}"
    else:
        assert not said, f"{ex.id}: MEASURES_MEMORY is only ever set to False"


def _top_level_names(tree: ast.Module) -> list[str]:
    """Names a module binds at its top level with an assignment, a def or a class, once per binding."""
    names = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return names


def test_no_module_binds_a_top_level_name_twice():
    """A constant of one check given again further down for another (varlen's RISE, once) silently
    changes the first check: every call reads the last binding. Lint does not see plain assignments."""
    twice = {}
    for path in sorted((KIT / "grader").rglob("*.py")):
        names = _top_level_names(ast.parse(path.read_text()))
        again = sorted({n for n in names if names.count(n) > 1})
        if again:
            twice[str(path.relative_to(KIT))] = again
    assert not twice, twice


def test_the_architecture_table_names_every_module():
    """README's "How a grading run works" table: every module of grader/ is named in some row, by its file name or
    its package's folder (`grader/render/`; an exercise's checks by `grader/hidden/ID/`), so the table keeps up."""
    table = README.split("## How a grading run works", 1)[1].split("**The Python API**", 1)[0]
    rows = "\n".join(line for line in table.splitlines() if line.startswith("|"))
    grader = KIT / "grader"
    unnamed = []
    for path in sorted(grader.rglob("*.py")):
        rel = path.relative_to(grader)
        if path.name in ("__init__.py", "__main__.py") or rel.parts[0] in ("templates",) or (
                rel.parts[0] == "hidden" and len(rel.parts) > 2):  # an exercise's checks: grader/hidden/ID/
            continue
        folder = f"`grader/{rel.parent.as_posix()}/`"  # a package's row names it (render/, room/, platforms/)
        if path.name not in rows and not (len(rel.parts) > 1 and folder in rows):
            unnamed.append(rel.as_posix())
    assert unnamed == [], unnamed


def _kit_imports():
    """(file, line, module, name) for every ``from grader... import name`` in grader/, inside functions too."""
    for path in sorted((KIT / "grader").rglob("*.py")):
        package = list(path.relative_to(KIT).with_suffix("").parts)[:-1]  # a module's package, or an __init__'s own
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("grader")):
                base = package[:len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    yield path.relative_to(KIT), node.lineno, module, alias.name


def test_every_name_the_kit_imports_from_itself_exists():
    """A name moved between modules breaks an import inside a function only when that function runs (a batch
    with a broken submission crashed on ``render.common.neutral`` after it moved): each is looked up here."""
    import importlib

    missing = []
    for file, line, module, name in _kit_imports():
        found = importlib.import_module(module)
        if name != "*" and not hasattr(found, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{file}:{line}: {module}.{name}")
    assert not missing, missing
