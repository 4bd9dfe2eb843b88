"""Every exercise is complete and consistent: prompt, stub, public tests, rubric, reference, checks."""
import ast
import importlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from grader import catalog, engine, rubric

EXERCISES = catalog.exercises()
IDS = [e.id for e in EXERCISES]


def test_catalog_finds_exercises():
    assert "decode_mask" in IDS


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_exercise_has_every_part(ex):
    for path in (ex.prompt_path, ex.stub_path, ex.reference_path, ex.rubric_path, ex.hidden_checks):
        assert path.is_file(), f"{ex.id}: missing {path}"
    assert ex.public_tests, f"{ex.id}: no public tests"
    assert isinstance(ex.rubric, rubric.Rubric)  # loading validates it


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_stub_functions_raise_not_implemented(ex):
    tree = ast.parse(ex.stub_path.read_text())
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    assert functions
    for fn in functions:
        raises = [n for n in ast.walk(fn) if isinstance(n, ast.Raise)]
        assert raises and "NotImplementedError" in ast.unparse(raises[-1]), f"{ex.id}.{fn.name}"


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_rubric_knows_every_diagnosis_and_check(ex):
    known = {d.id for d in ex.rubric.diagnoses}
    for mutant in ex.mutants:
        assert set(mutant.expected_diagnoses) <= known, f"{mutant.path}: diagnosis not in the rubric"
    checks = importlib.import_module(f"grader.hidden.{ex.id}.checks")  # shared checks are imported
    assert ex.check_ids == {name.removeprefix("check_") for name, value in vars(checks).items()
                            if name.startswith("check_") and callable(value)}, "read from source != collected"
    hidden_sources = "".join(p.read_text() for p in ex.hidden_package.glob("*.py"))
    for diagnosis_id in known:
        assert f'"{diagnosis_id}"' in hidden_sources, f"{ex.id}: no hidden check draws {diagnosis_id}"


@pytest.fixture(scope="module")
def public_test_reports(tmp_path_factory):
    """Every exercise's public tests, run once in one pytest process over one folder holding every
    reference (as the grader places a submission's modules side by side): {test file: junit testcases}."""
    folder = tmp_path_factory.mktemp("public")
    for ex in EXERCISES:
        for f in ex.folder.glob("*.py"):
            if f != ex.stub_path:
                (folder / f.name).write_text(f.read_text())
        (folder / f"{ex.id}.py").write_text(ex.reference_path.read_text())
    (folder / "pytest.ini").write_text("[pytest]\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", "junit.xml",
                    str(folder)], cwd=folder, capture_output=True, text=True, timeout=300)
    cases = ET.parse(folder / "junit.xml").getroot().iter("testcase")
    by_file: dict = {}
    for case in cases:
        by_file.setdefault(case.get("classname", "").split(".")[0], []).append(case)
    return by_file


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
def test_public_tests_pass_on_the_reference(ex, public_test_reports):
    cases = public_test_reports.get(f"test_{ex.id}_public", [])
    assert cases, f"no public test of {ex.id} ran"
    broken = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert not broken, broken


@pytest.fixture(scope="module")
def stubs_graded(tmp_path_factory):
    """Every stub in one folder, graded once (self-study: not attempted is not counted)."""
    folder = tmp_path_factory.mktemp("stubs")
    for ex in EXERCISES:
        (folder / f"{ex.id}.py").write_text(ex.stub_path.read_text())
    return engine.grade(folder, seed=0)


@pytest.mark.parametrize("ex", EXERCISES, ids=IDS)
@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_the_stub_is_not_attempted(ex, stubs_graded):
    result = stubs_graded.exercise(ex.id)
    assert result.status == "not_attempted" and result.level is None and not result.counted, result


def test_mutants_declare_their_diagnosis():
    for ex in EXERCISES:
        for mutant in ex.mutants:
            # the catalog refuses a mutant that names no EXPECTED_DIAGNOSIS (CatalogError)
            if mutant.expected_diagnosis == ():  # no diagnosis to draw: the mutant must say what level it earns
                assert mutant.expected_level in ("weak", "hire"), mutant.path


def test_correct_variants_implement_every_function_of_the_stub():
    for ex in EXERCISES:
        wanted = {n.name for n in ast.parse(ex.stub_path.read_text()).body
                  if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
        for path in ex.correct_variants:
            defined = {n.name for n in ast.parse(path.read_text()).body
                       if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            assert wanted <= defined, (path, sorted(wanted - defined))


def _pytest_exit(folder, ex, implementation, test_file) -> int:
    """pytest's exit code for ``test_file`` run against ``implementation`` as the exercise module."""
    for f in ex.folder.glob("*.py"):
        if f != ex.stub_path:
            (folder / f.name).write_text(f.read_text())
    (folder / f"{ex.id}.py").write_text(implementation.read_text())
    (folder / "test_under_study.py").write_text(test_file.read_text())
    (folder / "pytest.ini").write_text("[pytest]\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_under_study.py"],
                          cwd=folder, capture_output=True, text=True, timeout=300).returncode


OWN_TESTED = [ex for ex in EXERCISES if ex.rubric.own_tests]


@pytest.mark.parametrize("ex", OWN_TESTED, ids=[ex.id for ex in OWN_TESTED])
def test_own_tests_earn_only_what_the_public_tests_miss(ex, tmp_path):
    """Every known-wrong version the own-test checks run against passes the kit's public tests, so a copy of
    them (or the live room's tab left as it opens) catches none; the reference's own tests catch each one.
    The newcomer pass found the public tests scoring 4 of 4 and meeting both own-test criteria."""
    declared = ex.rubric.own_tests
    public = ex.folder / f"test_{ex.id}_public.py"
    reference_tests = catalog.KIT_ROOT / "solutions" / f"test_{ex.id}.py"
    assert declared.classic in declared.scored
    for n, name in enumerate(declared.scored):
        wrong = ex.mutant(name).module_path
        (tmp_path / f"p{n}").mkdir(), (tmp_path / f"r{n}").mkdir()
        assert _pytest_exit(tmp_path / f"p{n}", ex, wrong, public) == 0, f"the public tests catch {name}"
        assert _pytest_exit(tmp_path / f"r{n}", ex, wrong, reference_tests) == 1, f"the reference tests miss {name}"
