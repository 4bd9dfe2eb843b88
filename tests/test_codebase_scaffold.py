"""`kvgrade new ID` writes a working exercise: the template is graded here, for real, in a copy
of the kit's layout, so it stays an exercise the catalog, the calibration and verify accept."""
import ast
import shutil

import pytest
from click.testing import CliRunner

from grader import catalog, rubric, verify
from grader.cli import main
from grader.scaffold import ScaffoldError, files, new_exercise

ID = "zz_scaffold_probe"


@pytest.fixture
def kit(tmp_path, monkeypatch):
    """A kit root holding only the scaffolded exercise; the catalog reads from it."""
    root = tmp_path / "kit"
    (root / "grader" / "hidden").mkdir(parents=True)
    shutil.copyfile(catalog.HIDDEN_ROOT / "pytest.ini", root / "grader" / "hidden" / "pytest.ini")
    written = new_exercise(ID, root)
    monkeypatch.setattr(catalog, "KIT_ROOT", root)
    monkeypatch.setattr(catalog, "HIDDEN_ROOT", root / "grader" / "hidden")
    return root, written


def test_every_template_file_is_written_with_the_id(kit):
    root, written = kit
    assert sorted(p.relative_to(root) for p in written) == sorted(files(ID))
    for path in written:
        assert "{id}" not in str(path) and "{id}" not in path.read_text(), path
        if path.suffix == ".py":
            ast.parse(path.read_text(), str(path))


def test_the_scaffold_passes_the_catalog_checks(kit):
    (ex,) = catalog.exercises()
    assert ex.id == ID and ex.mutants and ex.correct_variants and ex.public_tests
    assert rubric.structure_problems(ex.rubric, ex.check_ids) == []
    known = {d.id for d in ex.rubric.diagnoses}
    source = ex.hidden_checks.read_text()
    for mutant in ex.mutants:
        assert set(mutant.expected_diagnoses) <= known
    for diagnosis in known:
        assert f'"{diagnosis}"' in source, diagnosis
    candidate_text = " ".join(p.read_text() for p in [ex.prompt_path, ex.stub_path, *ex.public_tests])
    assert not [t for t in ex.rubric.telltales if t in candidate_text]


@pytest.mark.slow
def test_the_scaffold_grades_like_an_exercise(kit, tmp_path):
    """The reference reaches strong_hire, the mutant is caught and named, the variant passes
    (each graded by the engine, through verify)."""
    (ex,) = catalog.exercises()
    reference = verify.judge(ID, None, 0)
    assert reference.ok, reference.line
    for mutant in ex.mutants:
        outcome = verify.judge(ID, mutant.name, 0)
        assert outcome.ok, outcome.line
    for path in ex.correct_variants:
        outcome = verify.judge(ID, f"variant:{path.stem}", 0)
        assert outcome.ok, outcome.line


def test_kvgrade_new_refuses_a_bad_or_taken_id(tmp_path):
    for bad in ("Bad-Id", "1st", "decode_mask"):
        out = CliRunner().invoke(main, ["new", bad])
        assert out.exit_code == 2 and "Traceback" not in out.output, out.output
    with pytest.raises(ScaffoldError, match="not a kvgrade checkout"):
        new_exercise("fine_id", tmp_path)
