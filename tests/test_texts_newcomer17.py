"""Report texts newcomer pass 17 found (its FINDINGS.md items 3, 6, 7 and 15), through the real commands
on real saved results (tests/golden/top_left.json: what `kvgrade grade --json` wrote for a top-left mask).

- item 6: a diagnosis's sentence is said once in every format, each failing check tagged with its id;
- item 3: `kvgrade hint` is offered only where the reader can run it, while hints remain, with the real folder;
- item 7: a recorded hint that caps the level says so in "to reach", and the two hint lines say which hints;
- item 15: a misspelt observed criterion in a notes file is an error naming the valid ones.
"""
import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main

GOLDEN = Path(__file__).parent / "golden" / "top_left.json"
ROOM_KEPT_BY = ("Kept by the kvgrade serve server on the interviewer's machine: every edit, run, hint and "
                "observation recorded as it happened. The candidate never held this record.")
WORKSPACE_KEPT_BY = ("Kept on the candidate's machine by kvgrade start / grade / hint: context for the interviewer, "
                     "not tamper-proof evidence, and it never changes a level.")


@pytest.fixture
def saved():
    data = json.loads(GOLDEN.read_text())
    data.update(submission="candidate", seed=0)  # the golden file leaves out what differs per run
    return data


def invoke(tmp_path, data, *args, name="result.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return CliRunner().invoke(main, ["report", str(path), *map(str, args)])


def report(tmp_path, data, *args):
    out = invoke(tmp_path, data, *args)
    assert out.exit_code == 0, out.output
    return out.stdout


def in_workspace(data, folder="ws", hints_seen=0, live=False):
    """The saved result as `kvgrade grade` wrote it in a workspace made by `kvgrade start` (or, ``live``,
    as the room's final grading: the server's timeline, never the candidate's)."""
    data.update(submission=folder, live=live,
                session={"started": "2026-12-05T16:51:11+00:00", "minutes": 45, "used_minutes": 3.0,
                         "kept_by": ROOM_KEPT_BY if live else WORKSPACE_KEPT_BY,
                         **({} if live else {"workspace": "ws"})})  # where api.grade logged the run
    e = data["exercises"][0]
    e["module"] = f"/home/cand/{folder}/decode_mask.py" if folder.endswith("decode_mask") else \
        f"/home/cand/{folder}/decode_mask/decode_mask.py"
    e["timeline"] = {"runs": 1, "points": [[0.5, sum(c["passed"] for c in e["checks"]), len(e["checks"])]],
                     "first_correct_minutes": None, "diagnoses": [], "hints_seen": hints_seen}
    return data


def all_passed(data):
    """Every check passed and no diagnosis: strong hire, provisional on the observed criteria."""
    e = data["exercises"][0]
    for c in e["checks"]:
        c.update(passed=True, message="", case=None, picture=None, kind=None, named=[])
    e["diagnoses"], e["own_tests"] = [], None
    return data


def notes_file(tmp_path, text):
    path = tmp_path / "notes.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- item 6: each diagnosis said once

def _plain_markdown(text):
    return re.sub(r"\\(.)", r"\1", text)


def _texts(tmp_path, data):
    """What a reader of each format reads, markup undone."""
    out = {"terminal": report(tmp_path, data),
           "markdown": _plain_markdown(report(tmp_path, data, "--markdown", "-")),
           "html": html.unescape(report(tmp_path, data, "--html", "-")),
           "junit": html.unescape(report(tmp_path, data, "--junit", "-"))}
    gradescope = json.loads(report(tmp_path, data, "--gradescope", "-", "--feedback", "detail"))
    out["gradescope"] = "\n".join([gradescope["output"], *(t["output"] for t in gradescope["tests"])])
    return out


def test_every_format_says_each_diagnosis_once_and_tags_each_check_with_its_id(saved, tmp_path):
    failing = [c for c in saved["exercises"][0]["checks"] if not c["passed"] and c["named"]]
    assert failing, "the golden result names a mistake in its failing checks"
    for fmt, text in _texts(tmp_path, saved).items():
        for c in failing:
            for diagnosis, sentence in c["named"]:
                assert text.count(sentence) <= 1, (fmt, c["id"], sentence)
                # the check's own line: what differs, then the id of the mistake it fits
                line = next(line for line in text.splitlines() if c["message"][:40] in line)
                assert f"[{diagnosis}]" in line and sentence not in line, (fmt, line)
    plain = next(c for c in failing if c["id"] == "plain_decode")
    markdown = _texts(tmp_path, saved)["markdown"]
    line = next(line for line in markdown.splitlines() if "what happened: decode_causal_mask(1, 2)" in line)
    assert line.count("row 0 sees 1 key") == 1, line  # "row 0 sees 1 key, expected 2; ... row 0 sees 1 key, not 2"
    assert plain["named"][0][1] not in line


# ---------------------------------------------------------------- item 3: where hints are offered

def test_a_live_room_result_offers_no_hint_in_any_copy(saved, tmp_path):
    room = in_workspace(saved, folder="/srv/interview/submissions/final", live=True)
    room["exercises"][0]["hints_given"] = [2]
    for args in (("--feedback", "summary"), ("--feedback", "summary", "--markdown", "-"),
                 ("--feedback", "summary", "--html", "-"), (), ("--html", "-")):
        text = report(tmp_path, room, *args)
        assert "kvgrade hint" not in text and "stuck?" not in text, args
        assert "hints recorded by the interviewer: hint 2" in " ".join(text.split()), args


def test_gradescope_output_of_a_workspace_result_offers_no_hint(saved, tmp_path):
    data = json.loads(report(tmp_path, in_workspace(saved), "--gradescope", "-"))
    texts = [data["output"], *(t["output"] for t in data["tests"])]
    assert not any("kvgrade hint" in t or "stuck?" in t for t in texts), data["output"]


def test_no_hint_is_offered_once_every_hint_was_printed(saved, tmp_path):
    used_up = in_workspace(saved, hints_seen=4)
    for args in ((), ("--feedback", "summary"), ("--feedback", "summary", "--markdown", "-")):
        text = report(tmp_path, used_up, *args)
        assert "hints used: 4 of 4" in text and "stuck?" not in text, args


@pytest.mark.parametrize("graded", ["ws", "ws/decode_mask"])
def test_the_offer_names_the_workspace_and_the_next_hint_in_summary_and_detail(saved, tmp_path, graded):
    """Detail feedback offers it too: it is what `kvgrade grade` shows a candidate working in the workspace."""
    data = in_workspace(saved, folder=graded, hints_seen=1)
    for args in ((), ("--feedback", "summary"), ("--markdown", "-"), ("--feedback", "summary", "--html", "-")):
        text = _plain_markdown(report(tmp_path, data, *args))
        assert "YOUR_WORKSPACE_FOLDER" not in text, args
        assert "stuck? 3 more staged hints (next: hint 2): kvgrade hint decode_mask ws" in text, args


# ---------------------------------------------------------------- item 7: hints that cap the level

@pytest.mark.parametrize("shown", ["false", "true"])
def test_to_reach_says_not_possible_after_the_hint_that_caps_the_level(saved, tmp_path, shown):
    data = in_workspace(all_passed(saved), hints_seen=2)
    notes = notes_file(tmp_path, f"[decode_mask]\nhints = [2]\n[decode_mask.observed]\n"
                                 f"names_library_conventions = {shown}\nmaps_rule_to_tiles = true\n")
    text = report(tmp_path, data, "--notes", notes)
    assert "to reach strong hire: not possible after hint 2" in text, text
    assert "to reach strong hire: show" not in text and "after the hints given" not in text
    saved_again = json.loads(report(tmp_path, data, "--notes", notes, "--json", "-"))["exercises"][0]
    assert saved_again["level"] == "hire"
    assert saved_again["to_raise"].startswith("to reach strong hire: not possible after hint 2")
    for fmt in ("--markdown", "--html"):
        assert "to reach strong hire: not possible after hint 2" in report(tmp_path, data, "--notes", notes, fmt, "-")


def test_hints_recorded_and_hints_taken_are_two_wordings_that_name_the_hints(saved, tmp_path):
    data = in_workspace(all_passed(saved), hints_seen=2)
    notes = notes_file(tmp_path, "[decode_mask]\nhints = [2]\n")
    text = report(tmp_path, data, "--notes", notes)
    lines = [line.strip() for line in text.splitlines()]
    assert "hints recorded by the interviewer: hint 2 (1 of 4 staged); they count toward the level" in lines
    taken = [line for line in lines if line.startswith("hints used:")]
    assert len(taken) == 1 and taken[0].startswith("hints used: 2 of 4 (hints 1 and 2), taken with kvgrade hint")
    assert "1 of 4, recorded" not in text  # "1 of 4 (hint 2)" read as hint 1


# ---------------------------------------------------------------- item 15: misspelt observed criterion

def test_a_misspelt_observed_criterion_is_an_error_naming_the_valid_ones(saved, tmp_path):
    notes = notes_file(tmp_path, "[decode_mask.observed]\nnot_a_criterion = true\n")
    written = tmp_path / "out.json"
    out = invoke(tmp_path, saved, "--notes", notes, "--json", written)
    assert out.exit_code == 2, out.output
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    line = out.stderr.strip()
    assert line.startswith("Error: ") and "not_a_criterion is not an observed criterion of decode_mask" in line
    for valid in ("explains_why_decode_hides_the_bug", "names_library_conventions", "maps_rule_to_tiles"):
        assert valid in line
    assert "graded live, also validates_sizes" in line  # a validation criterion is observed when graded live
    assert not written.exists()


def test_grade_refuses_a_misspelt_observed_criterion_too(tmp_path):
    notes = notes_file(tmp_path, "[decode_mask.observed]\nnames_library_convention = true\n")
    solutions = Path(__file__).resolve().parent.parent / "solutions"
    out = CliRunner().invoke(main, ["grade", str(solutions), "-e", "decode_mask", "--check", "plain_decode",
                                    "--notes", str(notes)])
    assert out.exit_code == 2, out.output
    assert "names_library_convention is not an observed criterion of decode_mask" in out.stderr
    assert "names_library_conventions" in out.stderr
