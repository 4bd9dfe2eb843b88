"""The terminal summary says each diagnosis once, counts the same failures the same way, and
uses the singular for one (issue 28, item 2).

The result is tests/golden/top_left.json, what `kvgrade grade --json` wrote for a top-left mask
with weak tests (test_cli.py keeps it true): six failing checks name top_left_alignment.
"""
import json
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grader.cli import main
from grader.render.common import own_tests_text, what_differs
from grader.result import CheckResult, plural

GOLDEN = Path(__file__).parent / "golden" / "top_left.json"


@pytest.fixture
def saved(tmp_path):
    data = json.loads(GOLDEN.read_text())
    data.update(submission="candidate", seed=0)
    path = tmp_path / "result.json"
    path.write_text(json.dumps(data))
    return path, data["exercises"][0]


def terminal(path) -> str:
    done = CliRunner().invoke(main, ["report", str(path)])
    assert done.exit_code == 0, done.output
    return click.unstyle(done.output)


def test_each_diagnosis_is_said_once_and_each_check_says_what_differs(saved):
    path, exercise = saved
    out = terminal(path)
    named = [c for c in exercise["checks"] if c["named"]]
    assert len(named) >= 6  # the premise: several checks name the same mistake
    sentences = {s for c in named for _, s in c["named"]}
    for d in exercise["diagnoses"]:
        assert out.count(d["message"]) == 1, d["id"]
    assert not [s for s in sentences if s in out and s not in {d["message"] for d in exercise["diagnoses"]}]
    for c in named:
        line = next(line for line in out.splitlines() if line.strip().startswith(f"x {c['id']}:"))
        assert line.rstrip().endswith(f"[{', '.join(dict.fromkeys(d for d, _ in c['named']))}]")
        assert what_differs(CheckResult(**c)) in line  # what differs stays: the check's own words


def test_the_reason_and_what_would_raise_it_count_the_same_failures(saved):
    path, _ = saved
    out = terminal(path)
    reason = next(line for line in out.splitlines() if line.strip().startswith("weak:"))
    to_raise = next(line for line in out.splitlines() if line.strip().startswith("to reach hire:"))
    counts = [re.search(r"and (\d+) more", line) for line in (reason, to_raise)]
    assert all(counts) and counts[0].group(1) == counts[1].group(1), (reason, to_raise)


def test_what_differs_drops_only_the_named_sentences():
    check = CheckResult("c", False, message="mask differs in 3 cells; top-left aligned: row 0 sees 1 key; extra",
                        named=[["top_left_alignment", "top-left aligned: row 0 sees 1 key"]])
    assert what_differs(check) == "mask differs in 3 cells; extra"
    alone = CheckResult("c", False, message="only the sentence", named=[["x", "only the sentence"]])
    assert what_differs(alone) == "only the sentence"  # never an empty line


def test_one_is_singular_everywhere_the_shared_code_counts():
    assert [plural(n, "key") for n in (0, 1, 2, 4093)] == ["0 keys", "1 key", "2 keys", "4,093 keys"]
    assert plural(1, "criterion", "criteria") == "1 criterion" and plural(3, "criterion", "criteria") == "3 criteria"
    line = own_tests_text({"score": 1.0, "caught": ["a"], "missed": [], "set_aside": ["test_x"]})
    assert "1 test set aside" in line


def test_a_candidates_copy_keeps_no_named_sentence(saved):
    """The sentences a check named quote hidden inputs: summary feedback drops them with the message."""
    from grader.notes import reread
    from grader.render.common import for_candidate

    path, _ = saved
    copy = for_candidate(reread(json.loads(path.read_text())))
    assert all(c.named == [] and c.message == "" for e in copy.exercises for c in e.checks)
