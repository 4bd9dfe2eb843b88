"""`kvgrade report` reads result.json as data from anywhere: every field checked, every level re-derived.

The saved result these tests edit is tests/golden/top_left.json: what `kvgrade grade --json` wrote
for a top-left mask with weak tests of its own (test_cli.py keeps it true).
"""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

GOLDEN = Path(__file__).parent / "golden" / "top_left.json"


@pytest.fixture
def saved():
    data = json.loads(GOLDEN.read_text())
    data.update(submission="candidate", seed=0)  # the golden file leaves out what differs per run
    return data


def report(tmp_path, data, *args, text=None):
    path = tmp_path / "result.json"
    path.write_text(text if text is not None else json.dumps(data))
    return CliRunner().invoke(main, ["report", str(path), *map(str, args)])


def all_passed(data):
    """The saved result with every check passed and no diagnosis (an edited file, or a good run)."""
    e = data["exercises"][0]
    for c in e["checks"]:
        c.update(passed=True, message="", case=None, picture=None, kind=None)
    e["diagnoses"], e["own_tests"] = [], None
    return data


def test_the_saved_result_stores_its_rubric_and_none_of_its_prose(saved):
    exercise = catalog.get("decode_mask")
    text = json.dumps(saved)
    stored = saved["exercises"][0]["rubric"]
    assert stored["id"] == "decode_mask" and len(stored["sha256"]) == 64
    assert {c["id"] for c in stored["criteria"]} == {c.id for c in exercise.rubric.criteria}
    prose = [exercise.rubric.summary, *exercise.rubric.levels.values(), *(f.ask for f in exercise.rubric.follow_ups),
             *(h.text for h in exercise.rubric.hints)]
    assert not [words for words in prose if json.dumps(words)[1:-1] in text]
    assert saved["live"] is False


def test_a_report_from_the_file_has_the_kits_words_and_agrees(saved, tmp_path):
    page = tmp_path / "r.html"
    done = report(tmp_path, saved, "--html", page)
    assert done.exit_code == 0, done.output
    assert "overall: weak" in done.output and "caution" not in done.output
    lines = done.output.splitlines()
    overall = next(line for line in lines if line.startswith("  overall:"))
    assert overall.endswith("(saved result, graded in 0.0 s)"), overall  # not timed as if it had just graded
    reason = next(line for line in lines if line.strip().startswith("weak:")).split(":", 1)[1].strip()
    assert sum(reason in line for line in lines) == 1, done.output  # one exercise: its reason said once
    rubric = catalog.get("decode_mask").rubric
    for words in (rubric.follow_ups[0].ask, rubric.criteria[0].text):  # the kit's words, not in the file
        assert words.split("(")[0][:40] in page.read_text()


def test_an_edited_level_is_re_derived_and_the_disagreement_shown_first(saved, tmp_path):
    saved["exercises"][0].update(level="strong_hire", reason="strong hire: every check passed", provisional=False)
    saved["overall"]["level"] = "strong_hire"
    files = {name: tmp_path / name for name in ("r.md", "r.html", "r.json")}
    done = report(tmp_path, saved, "--markdown", files["r.md"], "--html", files["r.html"], "--json", files["r.json"])
    assert done.exit_code == 0, done.output
    assert "overall: weak" in done.output and "strong hire" not in done.output.split("caution")[-1].splitlines()[-1]
    said = "the file says strong hire, but its checks and stored rubric give weak"
    for name, first_exercise_row in (("r.md", "| `decode_mask`"), ("r.html", "<td>")):
        body = files[name].read_text()
        assert said in body and body.index(said) < body.index(first_exercise_row), name  # above the exercises
    assert any(said in line for line in json.loads(files["r.json"].read_text())["caveats"])
    assert "**Overall: weak**" in files["r.md"].read_text()
    assert json.loads(files["r.json"].read_text())["overall"]["level"] == "weak"
    assert said in done.output.splitlines()[2]  # the terminal: right under the header


def test_re_judging_follows_the_stored_rubric_not_the_kits(saved, tmp_path):
    data = all_passed(saved)
    data["exercises"][0]["rubric"]["hints"][0] = "weak"  # the kit's first hint caps nothing
    data["exercises"][0]["hints_given"] = [1]
    done = report(tmp_path, data)
    assert done.exit_code == 0, done.output
    assert "overall: weak" in done.output and "hint 1 given (caps at weak)" in done.output
    assert "rules stored in the result, edited" in done.output
    notes = tmp_path / "notes.toml"
    notes.write_text("[decode_mask]\nhints = [1]\n")
    data["exercises"][0]["hints_given"] = []
    with_notes = report(tmp_path, data, "--notes", notes)
    assert with_notes.exit_code == 0 and "hint 1 given (caps at weak)" in with_notes.output


def test_a_result_without_a_stored_rubric_is_judged_with_the_kits_and_says_so(saved, tmp_path):
    del saved["exercises"][0]["rubric"]
    done = report(tmp_path, saved)
    assert done.exit_code == 0 and "stores no rubric; judged with the kit's current one" in done.output


def _set(path, value):
    def edit(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        target[last] = value
    return edit


E = ("exercises", 0)
FAILING = (*E, "checks", 1)  # speculative_verify: failed, with a case and a picture
MALFORMED = {  # what was edited -> words the one line names it by
    "picture grid not a grid": (_set((*FAILING, "picture", "expected"), "##"), "picture does not fit: expected"),
    "picture cell out of range": (_set((*FAILING, "picture", "expected", 0, 0), 10**30), "picture does not fit"),
    "picture shape negative": (_set((*FAILING, "picture", "shape"), [-4, 4]), "shape"),
    "picture labels": (_set((*FAILING, "picture", "labels"), {"1": "<img src=x>"}), "labels"),
    "picture a list": (_set((*FAILING, "picture"), [1, 2]), "picture does not fit: is list"),
    "case a list": (_set((*FAILING, "case"), [1, 2]), "case is list"),
    "case nested deep": (_set((*FAILING, "case"), {"x": json.loads("[" * 60 + "]" * 60)}), "case is not plain"),
    "case too long": (_set((*FAILING, "case"), {"x": list(range(1000))}), "case is not plain"),
    "level unknown": (_set((*E, "level"), "superb"), "level is 'superb'"),
    "status unknown": (_set((*E, "status"), "done"), "status is 'done'"),
    "bounds a list": (_set(("bounds",), ["memory"]), "bounds is list"),
    "bounds with a non-finite number": (_set(("bounds",), {"memory": float("inf")}), "bounds is not plain"),
    "check passed as text": (_set((*E, "checks", 0, "passed"), "yes"), "passed is str"),
    "failure kind unknown": (_set((*FAILING, "kind"), "fatal"), "kind is 'fatal'"),
    "criterion status unknown": (_set((*E, "criteria", 0, "status"), "maybe"), "status is 'maybe'"),
    "seed negative": (_set(("seed",), -1), "seed is -1"),
    "seed as text": (_set(("seed",), "0"), "seed is str"),
    "hint number zero": (_set((*E, "hints_given"), [0]), "hints_given"),
    "hint not in the stored rubric": (_set((*E, "hints_given"), [9]), "hint 9 is not in the rubric"),
    "stored rubric criterion level": (_set((*E, "rubric", "criteria", 0, "level"), "ultra"), "level 'ultra'"),
    "stored rubric hints": (_set((*E, "rubric", "hints"), ["sometimes"]), "hints should be levels"),
    "timeline points": (_set((*E, "timeline"), {"points": [[1, "x", 3]]}), "timeline is not an attempt log"),
    "own tests score": (_set((*E, "own_tests", "score"), "high"), "own_tests is not an own-tests summary"),
    "exercise a list": (_set(E, []), "exercises[0] is list"),
    "a diagnosis without a message": (_set((*E, "diagnoses", 0), {"id": "top_left_alignment"}), "no 'message'"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_result_is_refused_in_one_line(saved, tmp_path, name):
    edit, words = MALFORMED[name]
    edit(saved)
    done = report(tmp_path, saved, "--html", tmp_path / "r.html")
    assert done.exit_code == 2, done.output
    error = [line for line in done.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "is not a kvgrade result" in error[0] and words in error[0], done.output
    assert "Traceback" not in done.output and not (tmp_path / "r.html").exists()


def test_a_file_that_is_not_json_or_not_an_object_is_refused(saved, tmp_path):
    for text in ("{", "[]", '"x"', "NaN", json.dumps(saved).replace('"seed": 0', '"seed": 1e400')):
        done = report(tmp_path, saved, text=text)
        assert done.exit_code == 2 and "is not a kvgrade result" in done.output and "Traceback" not in done.output


@pytest.mark.parametrize("how", ["hidden_flag_added", "candidate_copy_filled_in"])
def test_a_level_written_into_a_copy_that_hides_levels_is_refused(saved, tmp_path, how):
    """Red team 21: a result marked levels_hidden skipped re-deriving, so a level written into it (the weak
    top-left mask's, set to strong_hire) was shown by --show-levels. A candidate's copy holds no level."""
    if how == "hidden_flag_added":
        data = dict(saved, levels_hidden=True)
    else:
        copy = tmp_path / "copy.json"
        made = report(tmp_path, saved, "--feedback", "summary", "--json", copy)
        assert made.exit_code == 0, made.output
        data = json.loads(copy.read_text())
        assert data["levels_hidden"] is True and data["exercises"][0]["level"] is None
        genuine = report(tmp_path, data, "--show-levels")
        assert genuine.exit_code == 0 and "strong hire" not in genuine.output, genuine.output
    data["exercises"][0]["level"] = "strong_hire"
    done = report(tmp_path, data, "--show-levels", "--feedback", "summary")
    assert done.exit_code == 2, done.output
    assert "holds no level" in done.output and "strong hire" not in done.output
    assert len(done.output.strip().splitlines()) == 1, done.output
