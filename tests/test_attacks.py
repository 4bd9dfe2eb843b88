"""Attacks on the grader's own process (issue 10), each run through the real grader on a real
submission folder: the attacker gets no level above weak, no hidden or host bytes reach any
output, nothing is written outside scratch, and the run ends in bounded time."""
import json
import os
import subprocess
import sys
import time
import zipfile

import pytest

from grader import catalog, engine
from grader.sandbox import Limits
from grader.submission import SubmissionError, has_modules, open_submission, skipped_links

KIT = catalog.KIT_ROOT
SOLUTIONS = KIT / "solutions"
HIDDEN_CHECKS = catalog.HIDDEN_ROOT / "decode_mask" / "checks.py"
FAST = Limits(call_seconds=5, load_seconds=10)
SECRET = "KVGRADE_ATTACK_SECRET_7f3a"  # planted in the grader's environment: must never show up


@pytest.fixture(autouse=True)
def planted_secret(monkeypatch):
    monkeypatch.setenv("KVGRADE_TEST_SECRET", SECRET)


def grade(folder, exercises=("decode_mask",), **kwargs):
    started = time.monotonic()
    result = engine.grade(folder, list(exercises), seed=3, limits=FAST, **kwargs)
    text = json.dumps(result.to_dict())
    assert SECRET not in text, "the grader's environment leaked into the result"
    assert time.monotonic() - started < 60
    return result, text


def reference_with_tests(folder, eid="decode_mask"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{eid}.py").write_bytes((SOLUTIONS / f"{eid}.py").read_bytes())
    own = SOLUTIONS / f"test_{eid}.py"
    if own.is_file():
        (folder / own.name).write_bytes(own.read_bytes())
    return folder


def assert_refused(ex, words="link"):
    assert (ex.status, ex.level) == ("error", "weak"), (ex.status, ex.level, ex.error)
    assert words in ex.error and "\n" not in ex.error


@pytest.mark.parametrize("target", [
    pytest.param(lambda: SOLUTIONS / "decode_mask.py", id="the_reference"),
    pytest.param(lambda: "/proc/self/cwd/solutions/decode_mask.py", id="the_reference_via_proc_cwd"),
    pytest.param(lambda: "/proc/self/environ", id="the_grader_environment"),
    pytest.param(lambda: HIDDEN_CHECKS, id="the_hidden_checks"),
    pytest.param(lambda: "/dev/zero", id="dev_zero"),
])
def test_a_module_that_is_a_link_is_refused_before_any_read(tmp_path, monkeypatch, target):
    monkeypatch.chdir(KIT)  # /proc/self/cwd then leads into the kit, as when run from the checkout
    (tmp_path / "decode_mask.py").symlink_to(target())
    (tmp_path / "test_decode_mask.py").write_bytes((SOLUTIONS / "test_decode_mask.py").read_bytes())
    result, text = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"))
    assert "def check_" not in text and "np.arange(S - T, S)" not in text


def test_a_linked_exercise_folder_is_refused(tmp_path):
    (tmp_path / "decode_mask").symlink_to(SOLUTIONS)
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"))


@pytest.mark.parametrize("make", [
    pytest.param(lambda p: p.symlink_to(HIDDEN_CHECKS), id="helper_links_to_hidden_checks"),
    pytest.param(lambda p: p.symlink_to("/dev/zero"), id="helper_links_to_dev_zero"),
    pytest.param(lambda p: p.mkdir(), id="folder_named_like_a_module"),
    pytest.param(lambda p: os.mkfifo(p), id="fifo_named_like_a_module"),
])
def test_a_file_beside_the_module_that_is_not_regular_refuses_the_exercise(tmp_path, make):
    folder = reference_with_tests(tmp_path / "decode_mask")
    make(folder / "notes.py")
    result, text = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "notes.py")
    assert "def check_" not in text


def test_a_linked_own_test_file_refuses_the_exercise(tmp_path):
    (tmp_path / "decode_mask.py").write_bytes((SOLUTIONS / "decode_mask.py").read_bytes())
    (tmp_path / "test_decode_mask.py").symlink_to(SOLUTIONS / "test_decode_mask.py")
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "test_decode_mask.py")


def test_a_module_that_is_a_fifo_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / "decode_mask.py")
    result, _ = grade(tmp_path)
    assert_refused(result.exercise("decode_mask"), "not a regular file")


def test_links_elsewhere_are_skipped_listed_and_never_followed(tmp_path):
    reference_with_tests(tmp_path)
    (tmp_path / ".venv").symlink_to(KIT)
    (tmp_path / "notes").symlink_to("/proc/self/environ")
    result, _ = grade(tmp_path)
    assert result.exercise("decode_mask").level == "strong_hire"
    assert skipped_links(tmp_path) == [".venv", "notes"]


def test_the_reader_of_another_exercises_module_refuses_its_link_too(tmp_path):
    reference_with_tests(tmp_path)  # decode_mask itself is fine, but its sibling is a link
    (tmp_path / "tree_mask.py").symlink_to(SOLUTIONS / "tree_mask.py")
    result, _ = grade(tmp_path, ("decode_mask", "tree_mask"))
    assert_refused(result.exercise("tree_mask"))
    assert_refused(result.exercise("decode_mask"), "tree_mask.py")  # it would be copied beside it


# -- submissions as zips, and the single top folder ------------------------------------------


def zip_folder(folder, archive, prefix=""):
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            zf.write(path, prefix + str(path.relative_to(folder)))
    return archive


def test_a_returned_bundle_zip_is_graded_through_its_top_folder(tmp_path):
    work = reference_with_tests(tmp_path / "work" / "decode_mask")
    archive = zip_folder(work.parent, tmp_path / "candX.zip", prefix="bundle/")
    with zipfile.ZipFile(archive, "a") as zf:
        zf.writestr("__MACOSX/bundle/._decode_mask.py", b"\0\0")
        zf.writestr(".DS_Store", b"junk")
    result, _ = grade(archive)
    assert result.exercise("decode_mask").level == "strong_hire"


def test_a_folder_holding_one_top_folder_is_looked_through(tmp_path):
    reference_with_tests(tmp_path / "candX" / "bundle" / "decode_mask")
    (tmp_path / "candX" / ".DS_Store").write_text("junk")
    result, _ = grade(tmp_path / "candX")
    assert result.exercise("decode_mask").level == "strong_hire"
    assert has_modules(tmp_path / "candX")  # batch: one candidate, not a folder of them


def test_a_folder_of_candidates_stands_for_its_subfolders(tmp_path):
    reference_with_tests(tmp_path / "batch" / "alice")
    reference_with_tests(tmp_path / "batch" / "bob")
    assert not has_modules(tmp_path / "batch")
    assert has_modules(tmp_path / "batch" / "alice")


def test_a_folder_without_any_exercise_module_is_a_submission_error(tmp_path):
    (tmp_path / "README.md").write_text("nothing here")
    (tmp_path / "helper.py").write_text("x = 1")
    with pytest.raises(SubmissionError, match="holds no exercise module"):
        grade(tmp_path)


@pytest.mark.parametrize("name,data,attr,words", [
    ("../escape.py", b"x = 1", None, "outside its folder"),
    ("/abs/decode_mask.py", b"x = 1", None, "outside its folder"),
    ("decode_mask.py", b"/etc/passwd", 0o120777 << 16, "symbolic link"),
])
def test_a_zip_with_unsafe_entries_is_refused_and_writes_nothing(tmp_path, name, data, attr, words):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo(name)
        if attr is not None:
            info.external_attr = attr
        zf.writestr(info, data)
    with pytest.raises(SubmissionError, match=words):
        with open_submission(archive):
            pass
    assert not (tmp_path / "escape.py").exists()


def test_a_zip_bomb_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("grader.submission.MAX_ZIP_BYTES", 1 << 20)
    archive = tmp_path / "bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("decode_mask.py", b"#" * (4 << 20))
    with pytest.raises(SubmissionError, match="more than 1 MiB"):
        with open_submission(archive):
            pass


def test_an_unpacked_zip_is_removed_after_grading(tmp_path):
    archive = zip_folder(reference_with_tests(tmp_path / "w"), tmp_path / "c.zip")
    with open_submission(archive) as root:
        assert (root / "decode_mask.py").is_file()
    assert not root.exists()


# -- python -m grader inside a submission folder -----------------------------------------------


def test_python_m_grader_in_a_submission_folder_does_not_import_its_modules(tmp_path):
    reference_with_tests(tmp_path)
    marker = tmp_path / "imported"
    for name in ("click", "jinja2"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('{name}')\n"
                                             "raise SystemExit('the candidate module ran in the grader')\n")
    env = dict(os.environ, PYTHONPATH=str(KIT))
    out = subprocess.run([sys.executable, "-m", "grader", "grade", ".", "-e", "decode_mask", "--json", "-"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    assert not marker.exists()
    assert json.loads(out.stdout)["exercises"][0]["level"] == "strong_hire"
