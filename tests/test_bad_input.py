"""Every command's bad input: exit 2, one clear message, no traceback, nothing written."""
import json
import os

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

SOLUTIONS = str(catalog.KIT_ROOT / "solutions")


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_usage_error(out, *needles):
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output
    for needle in needles:
        assert needle in out.output, (needle, out.output)


def test_a_missing_batch_path_is_a_usage_error_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "alice").mkdir()
    for command in (["batch", "alice", "bobb"], ["grade", "alice", "bobb"]):
        assert_usage_error(invoke(*command), "bobb does not exist")
    assert sorted(os.listdir(tmp_path)) == ["alice"]  # no ./kvgrade-batch


@pytest.mark.parametrize("content,problem", [
    ("[1, 2]", "the top level is list, not an object"),
    ("null", "the top level is NoneType, not an object"),
    ('{"schema": "kvgrade.result/1", "seed": 0, "submission": "x", "exercises": "oops"}',
     "result.exercises is str, not list"),
    ('{"schema": "kvgrade.result/2", "seed": 0, "submission": "x", "exercises": []}', "schema 'kvgrade.result/2'"),
    ('{"schema": "kvgrade.result/1", "seed": 0, "submission": "x", "exercises": [{"id": "decode_mask"}]}',
     "exercises[0] has no 'status'"),
    ('{"schema": "kvgrade.result/1", "seed": 0, "submission": "x", '
     '"exercises": [{"id": "a", "status": "graded", "checks": [{"id": "c", "passed": "yes"}]}]}',
     "exercises[0].checks[0].passed is str, not bool"),
    ("{not json", "is not a kvgrade result"),
])
def test_report_names_the_first_problem_of_a_file_that_is_not_a_result(tmp_path, content, problem):
    bad = tmp_path / "r.json"
    bad.write_text(content)
    for command in ("report", "notes"):
        assert_usage_error(invoke(command, bad), "is not a kvgrade result", problem)


def test_an_unknown_check_lists_the_exercises_checks():
    out = invoke("grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask", "--check", "random_shape")
    assert_usage_error(out, "no check 'random_shape' in decode_mask", "random_shapes", "plain_decode")


def test_check_needs_exactly_one_exercise():
    for extra in ([], ["-e", "decode_mask,tree_mask"]):
        assert_usage_error(invoke("grade", SOLUTIONS, *extra, "--check", "random_shapes"),
                           "--check needs exactly one -e ID")


def test_a_one_check_rerun_prints_the_check_not_a_level():
    out = invoke("grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask", "--check", "random_shapes")
    assert out.exit_code == 0, out.output
    assert "decode_mask / random_shapes: passed" in out.output
    assert "overall" not in out.output and "strong hire" not in out.output


@pytest.mark.slow
def test_show_checks_lists_the_checks_the_grader_runs():
    listed = invoke("show", "decode_mask", "--checks")
    assert listed.exit_code == 0
    graded = json.loads(invoke("grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask", "--json", "-").output)
    ran = {c["id"]: c["description"] for c in graded["exercises"][0]["checks"]}
    lines = listed.output.splitlines()
    assert [line.split()[0] for line in lines] == list(ran)
    for line, (check, description) in zip(lines, ran.items()):
        assert line.split(None, 1)[1].strip() == description
    for ex in catalog.exercises():  # every exercise's checks are readable without running anything
        assert ex.checks, ex.id


def test_two_outputs_on_stdout_are_refused(tmp_path):
    for pair in (["--json", "-", "--markdown", "-"], ["--markdown", "-", "--json", "-"]):
        assert_usage_error(invoke("grade", SOLUTIONS, "-e", "decode_mask", *pair), "only one output can go to stdout")


@pytest.mark.slow
def test_every_output_path_follows_one_rule_its_folder_must_exist(tmp_path, monkeypatch):
    """Nothing creates a missing parent folder: grade, report, batch, start and bundle refuse it alike."""
    monkeypatch.chdir(tmp_path)
    saved = tmp_path / "r.json"
    saved.write_text(invoke("grade", "--seed", "0", SOLUTIONS, "-e", "decode_mask", "--json", "-").output)
    missing = tmp_path / "no_such_dir"
    commands = [
        ["grade", SOLUTIONS, "-e", "decode_mask", "--html", missing / "r.html"],
        ["report", saved, "--markdown", missing / "r.md"],
        ["batch", SOLUTIONS, "--out", missing / "out"],
        ["start", missing / "ws"],
        ["bundle", missing / "x.zip"],
        ["bundle", missing / "folder"],
    ]
    for command in commands:
        assert_usage_error(invoke(*command), f"cannot write {missing}", "is not a folder")
    assert not missing.exists()


def test_batch_options_with_one_path_are_a_usage_error():
    assert_usage_error(invoke("grade", SOLUTIONS, "-e", "decode_mask", "--out", "x"), "--out applies to several PATHs")
    assert_usage_error(invoke("grade", SOLUTIONS, "-e", "decode_mask", "--trust-submissions"),
                       "--trust-submissions applies to several PATHs")  # was taken and silently ignored
    assert_usage_error(invoke("grade", SOLUTIONS, "-e", "decode_mask", "--out", "x", "--jobs", "2"),
                       "--out, --jobs apply to several PATHs")
    # an option's value taken for a PATH ("--json --seed 7": FILE is "--seed", 7 a second PATH)
    assert_usage_error(invoke("grade", SOLUTIONS, "--json", "--seed", "7"), "7 does not exist")


def test_grade_with_several_paths_is_batch():
    """One implementation, two spellings: both take the same options and refuse the same things."""
    for command in ("grade", "batch"):
        helped = invoke(command, "--help").output
        assert all(option in helped for option in ("--out", "--jobs", "--trust-submissions", "--show-levels"))
    assert "kvgrade batch PATH..." in " ".join(invoke("grade", "--help").output.split())


def test_solutions_and_a_path_together_are_a_usage_error():
    assert_usage_error(invoke("grade", SOLUTIONS, "--solutions"), "give PATH or --solutions, not both")
    assert_usage_error(invoke("grade"), "missing PATH")
