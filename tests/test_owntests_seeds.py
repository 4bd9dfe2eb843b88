"""Seeds nobody can predict (issue 23, item 9): without --seed, every grading draws a fresh one,
records it in the result and in every rerun line, and can be replayed with it."""
import json

import pytest
import yaml
from click.testing import CliRunner

from grader import catalog, engine
from grader.batch import Manifest, grade_many
from grader.cli import main
from grader.platforms.classroom import ACTIONS, WORKFLOW, write_starter
from grader.render import markdown

SOLUTIONS = catalog.KIT_ROOT / "solutions"
TOP_LEFT = SOLUTIONS / "mutants" / "decode_mask" / "top_left.py"


def _cli_json(*args) -> dict:
    out = CliRunner().invoke(main, ["grade", *map(str, args), "--json", "-"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_without_a_seed_each_grading_draws_its_own_and_records_it():
    seeds = {_cli_json(SOLUTIONS, "-e", "decode_mask", "--check", "random_shapes")["seed"] for _ in range(3)}
    assert len(seeds) == 3  # three draws below 2**32 agree by chance once in 10**19
    assert all(type(s) is int and 0 <= s < engine.SEED_BOUND for s in seeds)


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_a_fresh_seed_is_in_every_rerun_line_and_replays(tmp_path):
    (tmp_path / "decode_mask.py").write_bytes(TOP_LEFT.read_bytes())
    first = engine.grade(tmp_path, ["decode_mask"], only_checks={"random_shapes", "plain_decode"})
    text = markdown.render(first)
    failing = [c for c in first.exercise("decode_mask").checks if not c.passed]
    assert failing and all(f"--seed {first.seed} --check {c.id}" in text for c in failing)
    again = engine.grade(tmp_path, ["decode_mask"], seed=first.seed, only_checks={"random_shapes", "plain_decode"})
    assert [(c.id, c.message) for c in again.exercise("decode_mask").checks] == \
           [(c.id, c.message) for c in first.exercise("decode_mask").checks]


def test_a_seed_given_is_the_seed_used():
    assert _cli_json(SOLUTIONS, "-e", "tree_mask", "--check", "mask_random_trees", "--seed", "12")["seed"] == 12


@pytest.mark.slow
def test_a_batch_draws_one_seed_and_resumes_at_it(tmp_path):
    for name in ("ada", "bo"):
        (tmp_path / "in" / name).mkdir(parents=True)
        (tmp_path / "in" / name / "tree_mask.py").write_bytes((SOLUTIONS / "tree_mask.py").read_bytes())
    folders = sorted((tmp_path / "in").iterdir())
    grade_many(folders[:1], tmp_path / "out", ["tree_mask"], jobs=1)
    seed = Manifest(tmp_path / "out").seed
    assert seed is not None and json.loads((tmp_path / "out" / "ada" / "result.json").read_text())["seed"] == seed
    rows = grade_many(folders, tmp_path / "out", ["tree_mask"], jobs=1)  # run again: ada is reused
    assert Manifest(tmp_path / "out").seed == seed
    assert json.loads((tmp_path / "out" / "bo" / "result.json").read_text())["seed"] == seed
    assert f"seed {seed}" in (tmp_path / "out" / "summary.md").read_text() and len(rows) == 2


def test_a_classroom_workflow_without_a_seed_passes_none(tmp_path):
    write_starter(tmp_path / "starter", ["decode_mask"], None, "hire", install="kvgrade==0.1.0")
    steps = next(iter(yaml.safe_load((tmp_path / "starter" / WORKFLOW).read_text())["jobs"].values()))["steps"]
    command = next(s for s in steps if s.get("uses") == ACTIONS["grader"])["with"]["command"]
    assert command == "kvgrade grade . -e decode_mask --fail-under hire"


@pytest.mark.slow
def test_an_autograder_built_without_a_seed_draws_one_for_each_submission(tmp_path):
    import zipfile

    from grader.platforms.gradescope_package import CONFIG, build
    build(tmp_path / "autograder.zip", ["decode_mask"], None)
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        assert json.loads(zf.read(CONFIG))["seed"] is None  # results_for passes it on: engine.grade draws
