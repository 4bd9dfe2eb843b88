"""What a course's platform hands students, or lets their code read, carries no answer key
(issue 23, items 11 and 12); Gradescope totals come in whole hundredths (issue 24, item 9)."""
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import catalog
from grader.platforms import gradescope_package
from grader.render import gradescope
from grader.result import CheckResult, ExerciseResult, Result

ROOT = Path(__file__).resolve().parent.parent
SECRET_FOLDERS = {"solutions", "rubrics", "hidden", "mutants", "variants", "kit"}
ARCHIVES = (".tar.gz", ".whl", ".zip", ".egg")


def _kvgrade(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, timeout=600,
                          check=False, cwd=cwd or ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def needs_root_to_setuid():
    if os.geteuid() == 0:
        return
    if os.environ.get("KVGRADE_REQUIRE_BWRAP"):
        pytest.fail("KVGRADE_REQUIRE_BWRAP is set, and walking as a fresh uid needs root (CI runs as root)")
    pytest.skip("walking the autograder root as a fresh uid needs root, to setuid")


def answer_digests(hidden_checks: bool = True) -> set[str]:
    """Every file of the kit's answers: references, mutants, variants, rubrics and (unless a
    grader-only build, which must hold them, is looked at) the hidden checks."""
    files = [*(catalog.KIT_ROOT / "solutions").rglob("*"), *(catalog.KIT_ROOT / "rubrics").glob("*.toml"),
             *(catalog.HIDDEN_ROOT.rglob("*") if hidden_checks else [])]
    return {hashlib.sha256(p.read_bytes()).hexdigest() for p in files
            if p.is_file() and "__pycache__" not in p.parts and p.stat().st_size}  # an empty file holds nothing


def readable_by_a_fresh_uid(root: Path) -> list[Path]:
    """Every regular file under ``root`` that a fresh unprivileged uid can open, found by
    walking it as that uid (in a forked child), as a submission's code would."""
    uid = 1_950_000_000 + secrets.randbelow(1_000_000)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the child)
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            found = []
            for dirpath, _, filenames in os.walk(root):  # folders it cannot open are skipped
                for name in filenames:
                    path = os.path.join(dirpath, name)
                    try:
                        with open(path, "rb") as fh:
                            fh.read(1)
                        found.append(path)
                    except OSError:
                        pass
            os.write(w, json.dumps(found).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        found = json.loads(fh.read() or "[]")
    os.waitpid(pid, 0)
    return [Path(p) for p in found]


def answers_among(paths: list[Path], root: Path, digests: set[str]) -> list[str]:
    return [str(p.relative_to(root)) for p in paths
            if SECRET_FOLDERS & set(p.relative_to(root).parts) or p.name.endswith(ARCHIVES)
            or hashlib.sha256(p.read_bytes()).hexdigest() in digests]


@pytest.fixture(scope="module")
def autograder_root():
    """A mimicked /autograder after setup.sh: the zip unpacked into source/, the kit installed
    from its sdist into kvgrade-venv (apt and PyPI skipped: numpy and friends come from this
    Python), then setup.sh's own last lines, which make the answers root's alone."""
    needs_root_to_setuid()
    base = Path(tempfile.mkdtemp(prefix="kvgrade-autograder-test-", dir="/tmp"))
    os.chmod(base, 0o755)  # traversable by the fresh uid, as /autograder is
    root = base / "autograder"
    try:
        built = _kvgrade("autograder", str(base / "autograder.zip"), "-e", "decode_mask")
        assert built.returncode == 0, built.stderr
        with zipfile.ZipFile(base / "autograder.zip") as zf:
            zf.extractall(root / "source")
        shutil.copyfile(root / "source" / "run_autograder", root / "run_autograder")
        (root / "submission").mkdir()
        venv = root / gradescope_package.VENV
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                       check=True, timeout=120)
        (sdist,) = (root / "source").glob("kvgrade-*.tar.gz")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", "--prefix",
                        str(venv), str(sdist)], check=True, capture_output=True, timeout=600)
        for dirpath, dirnames, filenames in os.walk(root):  # as an unzip and a pip install under umask 022 leave it
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if not os.path.islink(path):
                    os.chmod(path, os.stat(path).st_mode | 0o444 | (0o111 if os.path.isdir(path) else 0))
        before = readable_by_a_fresh_uid(root)
        setup = (root / "source" / "setup.sh").read_text()
        tail = setup[setup.index('chmod -R a+rX "$ROOT/kvgrade-venv"'):]
        ran = subprocess.run(["bash", "-c", f"set -euo pipefail\nROOT={str(root)!r}\n{tail}"], capture_output=True,
                             check=False, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert ran.returncode == 0, ran.stderr
        yield root, before
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_after_setup_a_fresh_uid_reads_nothing_of_the_answers(autograder_root):
    root, before = autograder_root
    digests = answer_digests()
    assert "source/kvgrade-0.1.0.tar.gz" in answers_among(before, root, digests)  # the walk sees what is there
    after = readable_by_a_fresh_uid(root)
    assert answers_among(after, root, digests) == []
    site = next(root.glob("kvgrade-venv/lib/python3*/site-packages"))
    assert site / "grader" / "__init__.py" in after and root / "run_autograder" in after  # the rest stays readable


@pytest.mark.slow
def test_setup_locks_with_the_installed_kit_after_the_install():
    setup = gradescope_package._script("setup.sh", "kvgrade-0.1.0.tar.gz")
    install = setup.index("pip\" install -q --no-cache-dir")
    assert install < setup.index('chmod -R a+rX "$ROOT/kvgrade-venv"') < setup.index(
        '"$ROOT/kvgrade-venv/bin/python" -m grader.platforms.gradescope_package --lock "$ROOT"')


def test_what_is_locked_covers_each_answer_folder(tmp_path):
    site = tmp_path / "kvgrade-venv" / "lib" / "python3.12" / "site-packages" / "grader"
    assert gradescope_package.private_paths(tmp_path) == [tmp_path / "source"]  # nothing installed yet
    for name in ("kit", "hidden"):
        (site / name).mkdir(parents=True)
    assert gradescope_package.private_paths(tmp_path) == [tmp_path / "source", site / "kit", site / "hidden"]


# -- Gradescope totals --------------------------------------------------------------------------

@st.composite
def graded_results(draw) -> Result:
    exercises = []
    for i in range(draw(st.integers(1, 11))):
        status = draw(st.sampled_from(["graded", "graded", "graded", "not_attempted", "error"]))
        passes = draw(st.lists(st.booleans(), min_size=1, max_size=60)) if status == "graded" else []
        checks = [CheckResult(f"c{j}", p) for j, p in enumerate(passes)]
        exercises.append(ExerciseResult(f"ex{i}", status, checks=checks,
                                        error=None if status == "graded" else "no module found"))
    return Result(seed=0, submission="s", exercises=exercises)


@settings(max_examples=400, deadline=None)
@given(graded_results())
@pytest.mark.slow  # whole gradings: the full suite runs it, the fast loop stays under a minute
def test_gradescope_scores_are_whole_hundredths_that_add_up(result):
    data = json.loads(json.dumps(gradescope.render(result)))  # as results.json is written and read
    for value in [data["score"], data["max_score"]] + [t[k] for t in data["tests"] for k in ("score", "max_score")]:
        assert round(value, 2) == value and len(repr(float(value)).split(".")[1]) <= 2, value
    assert round(sum(t["score"] for t in data["tests"]) * 100) == round(data["score"] * 100)
    assert data["max_score"] == gradescope.POINTS * len(result.exercises)


# -- Classroom: a grader-only build, installed at run time -------------------------------------

def _interviewer_texts() -> list[str]:
    """Sentences only an interviewer should read: each rubric's hints, checkpoints and follow-ups (its
    telltales are code fragments, which the hidden checks' messages use too)."""
    import tomllib
    texts = []
    for path in (catalog.KIT_ROOT / "rubrics").glob("*.toml"):
        data = tomllib.loads(path.read_text())
        texts += [h["text"] for h in data.get("hints", [])] + [c["expect"] for c in data.get("checkpoints", [])]
        texts += [f["ask"] for f in data.get("follow_ups", [])] + [f["listen_for"] for f in data.get("follow_ups", [])]
    return [" ".join(t.split())[:60] for t in texts]


@pytest.fixture(scope="module")
def grader_only_sdist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("grader-only") / "build"  # not there yet: made, as every output folder is
    command = [sys.executable, "-m", "grader.platforms.grader_only"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    missing_parent = subprocess.run([*command, str(out / "no" / "such")], capture_output=True, text=True,
                                    timeout=600, check=False, cwd=ROOT, env=env)
    assert missing_parent.returncode == 2 and "cannot write" in missing_parent.stderr, missing_parent.stderr
    built = subprocess.run([*command, str(out)], capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
                           env=env)
    assert built.returncode == 0, built.stderr
    (sdist,) = out.glob("*.tar.gz")
    return sdist


@pytest.mark.slow
def test_the_grader_only_build_holds_no_answer_material(grader_only_sdist, tmp_path):
    import tarfile
    import tomllib
    with tarfile.open(grader_only_sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (top,) = tmp_path.iterdir()
    files = [p for p in top.rglob("*") if p.is_file()]
    assert [p.relative_to(top).as_posix() for p in files if "solutions" in p.parts] == ["solutions/README.md"]
    digests = answer_digests(hidden_checks=False)
    assert [p for p in files if hashlib.sha256(p.read_bytes()).hexdigest() in digests] == []  # no answer file, as is
    everything = "\n".join(" ".join(p.read_text(errors="replace").split()) for p in files)
    leaked = [t for t in _interviewer_texts() if t in everything]
    assert leaked == [], leaked[:3]
    for rubric in (top / "rubrics").glob("*.toml"):
        data = tomllib.loads(rubric.read_text())
        assert not {"hints", "checkpoints", "telltales"} & data.keys() and data["follow_ups"] == []
    assert 'name = "kvgrade-grader"' in (top / "pyproject.toml").read_text()


@pytest.mark.slow
def test_the_grader_only_build_grades_and_says_what_it_cannot_judge(grader_only_sdist, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-cache-dir", "--prefix", str(venv),
                    str(grader_only_sdist)], check=True, capture_output=True, timeout=600)
    work = tmp_path / "work"
    work.mkdir()
    solutions = catalog.KIT_ROOT / "solutions"
    for name in ("decode_mask.py", "test_decode_mask.py"):
        shutil.copyfile(solutions / name, work / name)
    shutil.copyfile(solutions / "mutants" / "tree_mask" / "triangle.py", work / "tree_mask.py")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed build, not this checkout
    graded = subprocess.run([str(venv / "bin" / "python"), "-m", "grader", "grade", str(work), "-e",
                             "decode_mask,tree_mask", "--seed", "0", "--json", "-"], capture_output=True, text=True,
                            timeout=600, check=False, cwd=tmp_path, env=env)
    assert graded.returncode == 0, graded.stderr
    result = {e["id"]: e for e in json.loads(graded.stdout)["exercises"]}
    decode, tree = result["decode_mask"], result["tree_mask"]
    assert (decode["level"], decode["provisional"], decode["own_tests"]) == ("strong_hire", True, None)
    own = [c for c in decode["criteria"] if c["id"].startswith("own_tests")]
    assert own and all(c["status"] == "to_observe" and "not judged by this grader-only build" in c["text"] for c in own)
    assert not [c for c in decode["checks"] if c["id"].startswith("own_tests")]
    assert tree["level"] == "weak" and "triangle_tree_mask" in {d["id"] for d in tree["diagnoses"]}
    assert not decode.get("interviewer", {}).get("hints") and not decode.get("follow_ups")  # no sheet text at all
    saved = tmp_path / "result.json"  # its own result, reported again by the same build: not "edited"
    saved.write_text(graded.stdout)
    again = subprocess.run([str(venv / "bin" / "python"), "-m", "grader", "report", str(saved)], capture_output=True,
                           text=True, timeout=600, check=False, cwd=tmp_path, env=env)
    assert again.returncode == 0 and "caution" not in again.stdout and "edited" not in again.stdout, again.stdout


def test_without_a_reference_an_unexpected_error_has_no_verdict(monkeypatch):
    from grader import engine
    from grader.catalog import Exercise
    tree = catalog.get("tree_mask")
    monkeypatch.setattr(Exercise, "reference_path", property(lambda self: Path("/nonexistent/reference.py")))
    facts = {"tree_mask": engine.ExerciseFacts(Path("tree_mask.py"), checks=[CheckResult("random_trees", False)],
                                               unexpected=["random_trees: unexpected error while checking"])}
    engine._blame(facts, 0, None)
    ex = engine.build_result(tree, facts["tree_mask"], required=True)
    assert ex.kit_error and ex.level is None and "grader-only build has no reference" in ex.reason


@pytest.mark.parametrize("spec", [None, "", "kvgrade-grader", "./kvgrade-grader-0.1.0.tar.gz", "/srv/k.tar.gz",
                                  "https://example.org/kvgrade-grader-0.1.0.tar.gz",
                                  "git+https://example.org/kvgrade.git@main", "kvgrade-grader>=0.1"])
def test_a_classroom_starter_needs_a_pinned_grader_only_build(tmp_path, spec):
    from grader.platforms.classroom import write_starter
    from grader.platforms.gradescope_package import PackageError
    with pytest.raises(PackageError, match="--install"):
        write_starter(tmp_path / "starter", ["decode_mask"], None, "hire", install=spec)
    assert not (tmp_path / "starter").exists()  # refused before anything is written


@pytest.mark.parametrize("spec", ["kvgrade-grader==0.1.0", "https://example.org/k-0.1.0.tar.gz#sha256=" + "a" * 64,
                                  "git+https://example.org/kvgrade.git@" + "0123456789" * 4])
def test_a_pinned_spec_is_installed_at_run_time_and_nothing_of_the_kit_is_committed(tmp_path, spec):
    from grader.platforms.classroom import write_starter
    write_starter(tmp_path / "starter", ["decode_mask"], None, "hire", install=spec)
    files = [p for p in (tmp_path / "starter").rglob("*") if p.is_file()]
    assert answers_among(files, tmp_path, answer_digests()) == []
    assert spec in (tmp_path / "starter" / ".github" / "workflows" / "classroom.yml").read_text()


@pytest.mark.parametrize("args,code", [(["--help"], 0), (["-h"], 0), (["--bogus"], 2), ([], 2)])
def test_the_grader_only_build_takes_no_option_for_a_folder(tmp_path, args, code):
    """A newcomer's `python -m grader.platforms.grader_only --help` built the package into a folder named
    `--help`: options are options, errors are one `Error:` line, and nothing is written either way."""
    ran = subprocess.run([sys.executable, "-m", "grader.platforms.grader_only", *args], capture_output=True,
                         text=True, timeout=120, check=False, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ran.returncode == code, ran.stderr
    assert list(tmp_path.iterdir()) == []
    assert ("usage: python -m grader.platforms.grader_only OUT_DIR" in ran.stdout) if code == 0 else (
        ran.stderr.splitlines()[-1].startswith("Error: "))
