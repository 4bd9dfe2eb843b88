"""The kvgrade command line, through click's CliRunner."""
import json
import os

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main


SOLUTIONS = str(catalog.KIT_ROOT / "solutions")  # absolute: the tests run from any folder
PYPROJECT = str(catalog.KIT_ROOT / "pyproject.toml")
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "top_left.json")
# isolation, bounds: per machine
VOLATILE = {"seconds", "module", "kvgrade_version", "submission", "submission_name", "isolation", "bounds"}


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_help_lists_the_commands():
    out = run("--help")
    assert out.exit_code == 0
    for command in ("grade", "verify", "list", "show"):
        assert command in out.output


def test_list_and_show():
    assert "decode_mask" in run("list").output
    shown = run("show", "decode_mask")
    assert shown.exit_code == 0 and "decode_causal_mask(T: int, S: int)" in shown.output


@pytest.mark.slow
def test_grade_solutions_json_to_stdout():
    out = run("grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask", "--json", "-")
    assert out.exit_code == 0
    data = json.loads(out.output)
    assert data["schema"] == "kvgrade.result/1" and data["seed"] == 0
    (ex,) = data["exercises"]
    assert (ex["id"], ex["status"], ex["level"], ex["error"]) == ("decode_mask", "graded", "strong_hire", None)
    assert data["overall"]["level"] == "strong_hire"


@pytest.mark.slow
def test_grade_prints_a_summary_with_the_diagnosis(top_left_example):
    out = run("grade", str(top_left_example), "-e", "decode_mask", "--seed", "5")
    assert out.exit_code == 0  # grading worked; the level is not the exit status
    assert "top_left_alignment" in out.output and "weak" in out.output and "seed 5" in out.output


@pytest.mark.slow
def test_summary_feedback_hides_hidden_inputs(top_left_example):
    out = run("grade", "--seed", "0", str(top_left_example), "-e", "decode_mask", "--feedback", "summary")
    assert "random_shapes" in out.output
    assert "decode_causal_mask(5," not in out.output  # no hidden shapes in the summary


@pytest.mark.parametrize("args,message", [
    (["grade", "no/such/folder"], "does not exist"),
    (["grade", PYPROJECT], "is not a folder"),
    (["grade", SOLUTIONS, "-e", "nope"], "unknown exercise 'nope'"),
    (["grade", SOLUTIONS, "--seed", "-1"], "non-negative"),
    (["grade", SOLUTIONS, "--notes", "no/such/notes.toml"], "cannot read it"),
    (["show", "nope"], "unknown exercise"),
    (["grade", SOLUTIONS, "--json", "no/such/folder/result.json"], "cannot write no/such/folder/result.json"),
    (["grade", SOLUTIONS, "--html", "/dev/null/report.html"], "cannot write /dev/null/report.html"),
    (["bundle", "/dev/null/bundle"], "cannot write /dev/null/bundle"),
    (["start", "/dev/null/workspace"], "cannot write /dev/null/workspace"),
])
def test_bad_input_is_a_clear_usage_error(args, message):
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and message in out.output
    assert "Traceback" not in out.output


def normalized(data):
    if isinstance(data, dict):
        return {k: normalized(v) for k, v in data.items() if k not in VOLATILE}
    if isinstance(data, list):
        return [normalized(v) for v in data]
    return data


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_golden_json_for_the_top_left_example(top_left_example):
    out = run("grade", "--seed", "0", str(top_left_example), "-e", "decode_mask", "--json", "-")
    got = normalized(json.loads(out.output))
    if os.environ.get("KVGRADE_UPDATE_GOLDEN"):
        with open(GOLDEN, "w") as fh:
            json.dump(got, fh, indent=2, sort_keys=True)
    with open(GOLDEN) as fh:
        assert got == json.load(fh)
