"""Courses' platforms, end to end with real processes: the Gradescope autograder zip run in a
root that mimics /autograder, the GitHub Classroom workflow's command, and --fail-under."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from grader import catalog
from grader.platforms.classroom import ACTIONS, WORKFLOW
from grader.sandbox.launch import _installed

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = catalog.KIT_ROOT / "solutions"
TOP_LEFT = SOLUTIONS / "mutants" / "decode_mask" / "top_left.py"

# Written from Gradescope's autograder specification
# (https://gradescope-autograders.readthedocs.io/en/latest/specs/), not from our renderer.
VISIBILITY = {"enum": ["hidden", "after_due_date", "after_published", "visible"]}
GRADESCOPE_RESULTS = {
    "type": "object",
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": VISIBILITY,
        "stdout_visibility": VISIBILITY,
        "extra_data": {"type": "object"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "properties": {
                "score": {"type": "number"}, "max_score": {"type": "number", "minimum": 0},
                "status": {"enum": ["passed", "failed"]}, "name": {"type": "string"},
                "name_format": {"type": "string"}, "number": {"type": "string"},
                "output": {"type": "string"}, "output_format": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}}, "visibility": VISIBILITY,
                "extra_data": {"type": "object"},
            },
            "additionalProperties": False,
        }},
        "leaderboard": {"type": "array"},
    },
    "anyOf": [{"required": ["score"]},
              {"required": ["tests"], "properties": {"tests": {"items": {"required": ["score"]}}}}],
}


def kvgrade(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd,
                          env=env or _env(), timeout=300)


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def correct_submission(folder: Path) -> Path:
    folder.mkdir()
    for name in ("decode_mask.py", "test_decode_mask.py"):
        shutil.copyfile(SOLUTIONS / name, folder / name)
    return folder


# -- Gradescope ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("built") / "autograder.zip"
    built = kvgrade("autograder", str(out), "-e", "decode_mask", "--seed", "11", "--after-published")
    assert built.returncode == 0, built.stderr
    return out


def mimic_autograder_root(zip_path: Path, root: Path) -> Path:
    """What Gradescope's harness does: unpack into source/, copy run_autograder to the root."""
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    runner = root / "run_autograder"
    shutil.copyfile(root / "source" / "run_autograder", runner)
    runner.chmod(0o755)
    (root / "submission").mkdir()
    return runner


def run_autograder(runner: Path, **env) -> subprocess.CompletedProcess:
    """setup.sh's system part (apt, a venv) is skipped: KVGRADE_PYTHON is this interpreter."""
    return subprocess.run([str(runner)], capture_output=True, text=True, timeout=300, cwd=runner.parent,
                          env=_env(AUTOGRADER_ROOT=str(runner.parent), KVGRADE_PYTHON=sys.executable, **env))


@pytest.mark.slow
def test_the_zip_holds_the_scripts_the_pinned_kit_and_the_chosen_set(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        names = set(zf.namelist())
        config = json.loads(zf.read("kvgrade-autograder.json"))
        setup = zf.read("setup.sh").decode()
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
    assert {"setup.sh", "run_autograder", "kvgrade-autograder.json", "kvgrade-0.1.0.tar.gz"} == names
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert config == {"kvgrade": "0.1.0", "exercises": ["decode_mask"], "seed": 11, "show_levels": False,
                      "tests_visibility": "after_published"}
    assert '/source/kvgrade-0.1.0.tar.gz"' in setup and "version_info < (3, 11)" in setup


@pytest.mark.slow
@pytest.mark.parametrize("zipped", [False, True], ids=["folder", "zip"])
def test_run_autograder_grades_a_submission_into_valid_results(autograder_zip, tmp_path, zipped, bwrap):
    """Here the uid level is missing (this Python lives under a private /root), so the run
    asks for bubblewrap; on Gradescope, the script's default is the uid level."""
    runner = mimic_autograder_root(autograder_zip, tmp_path / "autograder")
    work = correct_submission(tmp_path / "work")
    shutil.copyfile(TOP_LEFT, work / "decode_mask.py")  # a wrong answer: some points, not all
    if zipped:
        shutil.make_archive(str(runner.parent / "submission" / "upload"), "zip", work)
    else:
        shutil.copytree(work, runner.parent / "submission", dirs_exist_ok=True)
    ran = run_autograder(runner, KVGRADE_ISOLATION="bwrap")
    assert ran.returncode == 0, ran.stderr
    results = json.loads((runner.parent / "results" / "results.json").read_text())
    jsonschema.validate(results, GRADESCOPE_RESULTS)
    tests = results["tests"]
    assert tests and all(t["name"].startswith("decode_mask: ") for t in tests)
    assert {t["visibility"] for t in tests} == {"after_published"}
    cents = lambda x: round(x * 100)  # noqa: E731  every score is a whole number of hundredths
    assert all(cents(t["score"]) == t["score"] * 100 or abs(cents(t["score"]) - t["score"] * 100) < 1e-6 for t in tests)
    assert cents(results["score"]) == sum(cents(t["score"]) for t in tests)
    assert 0 < results["score"] < 10 == sum(cents(t["max_score"]) for t in tests) / 100
    assert "Seed 11." in results["output"] and "level" not in results["output"].lower()


@pytest.mark.slow
def test_a_submission_without_modules_scores_zero_with_the_reason(autograder_zip, tmp_path, bwrap):
    runner = mimic_autograder_root(autograder_zip, tmp_path / "autograder")
    (runner.parent / "submission" / "notes.txt").write_text("forgot the code")
    ran = run_autograder(runner, KVGRADE_ISOLATION="bwrap")
    assert ran.returncode == 0, ran.stderr
    results = json.loads((runner.parent / "results" / "results.json").read_text())
    jsonschema.validate(results, GRADESCOPE_RESULTS)
    assert results["score"] == 0 and "holds no exercise module" in results["output"]
    # the student's own words for it: no autograder folder, only the assignment's ids (a newcomer's pass)
    assert str(runner.parent) not in results["output"] and "submission holds no" in results["output"]
    assert "decode_mask" in results["output"] and "fused_attention" not in results["output"], results["output"]


@pytest.mark.slow
def test_a_link_named_like_a_zip_is_not_followed_out_of_the_submission(autograder_zip, tmp_path, bwrap):
    """Red team 15: ``submission/a.zip`` linking to a zip elsewhere had root grade that zip (4.97 points)."""
    runner = mimic_autograder_root(autograder_zip, tmp_path / "autograder")
    elsewhere = shutil.make_archive(str(tmp_path / "elsewhere"), "zip", correct_submission(tmp_path / "work"))
    (runner.parent / "submission" / "a.zip").symlink_to(elsewhere)
    ran = run_autograder(runner, KVGRADE_ISOLATION="bwrap")
    assert ran.returncode == 0, ran.stderr
    results = json.loads((runner.parent / "results" / "results.json").read_text())
    jsonschema.validate(results, GRADESCOPE_RESULTS)
    assert results["score"] == 0 and "a.zip" in results["output"], results["output"]


@pytest.mark.skipif(_installed("uid"), reason="this machine has the uid level, so there is no refusal to see")
def test_without_the_uid_level_the_autograder_refuses_instead_of_running_unprotected(autograder_zip, tmp_path):
    runner = mimic_autograder_root(autograder_zip, tmp_path / "autograder")
    correct_submission(tmp_path / "work")
    shutil.copytree(tmp_path / "work", runner.parent / "submission", dirs_exist_ok=True)
    ran = run_autograder(runner)
    assert ran.returncode == 1 and "refusing to run other people's code" in ran.stderr
    assert "Traceback" not in ran.stderr and not (runner.parent / "results" / "results.json").exists()


@pytest.mark.slow
def test_autograder_refuses_an_out_that_is_not_a_zip(tmp_path):
    refused = kvgrade("autograder", str(tmp_path / "autograder.tar"))
    assert refused.returncode == 2 and "must end in .zip" in refused.stderr and "Traceback" not in refused.stderr


# -- GitHub Classroom ----------------------------------------------------------------------------

@pytest.fixture
def starter(tmp_path) -> Path:
    made = kvgrade("classroom", str(tmp_path / "starter"), "-e", "decode_mask", "--seed", "9", "--fail-under", "hire",
                   "--install", "kvgrade-grader==0.1.0")
    assert made.returncode == 0, made.stderr
    return tmp_path / "starter"


def workflow_steps(starter: Path) -> list[dict]:
    workflow = yaml.safe_load((starter / WORKFLOW).read_text())
    (job,) = workflow["jobs"].values()
    return job["steps"]


@pytest.mark.slow
def test_the_workflow_parses_and_names_only_allowed_actions(starter):
    steps = workflow_steps(starter)
    used = [s["uses"] for s in steps if "uses" in s]
    assert set(used) <= set(ACTIONS.values()) and ACTIONS["reporter"] in used
    grader = next(s for s in steps if s["uses"] == ACTIONS["grader"])
    reporter = next(s for s in steps if s["uses"] == ACTIONS["reporter"])
    assert reporter["with"]["runners"] == grader["id"]
    assert f"steps.{grader['id']}.outputs.result" in reporter["env"][f"{grader['id'].upper()}_RESULTS"]
    assert grader["with"]["setup-command"] == "pip install kvgrade-grader==0.1.0"  # installed at run time
    assert not list(starter.rglob("*.tar.gz"))  # nothing of the kit is committed into the starter
    assert (starter / "decode_mask" / "decode_mask.py").is_file() and (starter / "README.md").is_file()


@pytest.mark.slow
def test_the_starter_keeps_no_session_and_says_what_its_grader_runs(starter):
    """A newcomer's pass: every student run said "started <when staff made the template>" and spoke of an
    interviewer, and the README called own tests "part of the grade", which the grader-only build cannot run."""
    assert not (starter / ".kvgrade").exists()
    readme = (starter / "README.md").read_text()
    assert "It has a prompt" in readme and "part of the grade" not in readme
    assert "this assignment's grader does not run them" in " ".join(readme.split())
    # the prompts keep their "Your own tests" section: the starter says which story holds here (a newcomer pass)
    assert "runs them" in (starter / "decode_mask" / "README.md").read_text()
    assert "Where a prompt says the grader runs them against wrong versions" in " ".join(readme.split())
    assert re.findall(r"^(\d)\. ", readme, re.M)[:3] == ["1", "2", "3"]  # each step on its own line
    assert "interview set" not in readme and "send it back" not in readme  # students push an assignment
    shutil.copyfile(SOLUTIONS / "decode_mask.py", starter / "decode_mask" / "decode_mask.py")
    ran = kvgrade("grade", str(starter), "-e", "decode_mask", "--seed", "9")
    assert ran.returncode == 0, ran.stderr
    assert "started" not in ran.stdout and "interviewer" not in ran.stdout, ran.stdout


def run_workflow_command(starter: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The step's command exactly as written, through a shell, with `kvgrade` being this checkout."""
    (grader,) = [s for s in workflow_steps(starter) if s.get("uses") == ACTIONS["grader"]]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "kvgrade").write_text(f'#!/bin/sh\nexec {sys.executable} -m grader "$@"\n')
    (bin_dir / "kvgrade").chmod(0o755)
    env = _env(PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(grader["with"]["command"], shell=True, cwd=starter, capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.slow
def test_the_workflow_command_passes_a_correct_workspace(starter, tmp_path):
    for name in ("decode_mask.py", "test_decode_mask.py"):
        shutil.copyfile(SOLUTIONS / name, starter / "decode_mask" / name)
    ran = run_workflow_command(starter, tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "seed 9" in ran.stdout


@pytest.mark.slow
@pytest.mark.parametrize("wrong", ["top_left", "stub"])
def test_the_workflow_command_fails_a_wrong_workspace(starter, tmp_path, wrong):
    if wrong == "top_left":
        shutil.copyfile(TOP_LEFT, starter / "decode_mask" / "decode_mask.py")
    ran = run_workflow_command(starter, tmp_path)
    assert ran.returncode == 1 and "below --fail-under hire" in ran.stderr, ran.stdout + ran.stderr


def test_fail_under_takes_only_a_level_and_one_submission(tmp_path):
    bad = kvgrade("grade", "--solutions", "--fail-under", "great")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    two = kvgrade("grade", str(SOLUTIONS), str(SOLUTIONS), "--fail-under", "hire")
    assert two.returncode == 2 and "--fail-under applies to one submission" in two.stderr
