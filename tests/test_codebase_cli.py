"""The CLI is a thin layer over grader.api, and keeps its conventions: one-line errors, --json
where a script reads the output, no folder created by a hint, the path inside the submission,
a workspace that shows its own exercises, hints only where they can be run."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import api, catalog, engine
from grader.cli import main

KIT = catalog.KIT_ROOT
SOLUTIONS = KIT / "solutions"


def kvgrade(*args, cwd=None, env=None):
    """The real command, in a child process: what a user's terminal shows."""
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=cwd or KIT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(KIT), **(env or {})},
                          check=False)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("args", [
    ["grade", "no/such/folder"],
    ["grade", SOLUTIONS, "-e", "nope"],
    ["show", "nope"],
    ["grade", SOLUTIONS, "--check", "x"],
])
def test_an_error_is_one_line_on_stderr(args, tmp_path):
    ran = kvgrade(*args, cwd=tmp_path)
    assert ran.returncode == 2 and ran.stdout == ""
    lines = ran.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in ran.stderr, ran.stderr


def test_a_refusal_for_want_of_isolation_is_one_line_without_usage(tmp_path):
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "decode_mask.py").write_text("x = 1\n")
    ran = kvgrade("batch", tmp_path, "--out", tmp_path / "out", cwd=tmp_path, env={"KVGRADE_ISOLATION": "process"})
    assert ran.returncode == 2 and len(ran.stderr.splitlines()) == 1, ran.stderr
    assert "refusing to run other people's code" in ran.stderr and "Try " not in ran.stderr
    assert not (tmp_path / "out").exists()


def test_list_shows_each_time_box_and_has_json():
    listed = json.loads(invoke("list", "--json").output)
    assert [e["id"] for e in listed] == [e.id for e in catalog.exercises()]
    for entry in listed:
        assert entry["minutes"] == catalog.get(entry["id"]).rubric.time_box_minutes
    text = invoke("list").output.splitlines()
    for line, entry in zip(text, listed):
        assert line.split()[0] == entry["id"] and (f"{entry['minutes']} min" in line if entry["minutes"] else True)


def test_show_checks_has_json():
    shown = json.loads(invoke("show", "tree_mask", "--checks", "--json").output)
    assert shown and [c["id"] for c in shown] == list(catalog.get("tree_mask").checks)
    assert invoke("show", "tree_mask", "--json").exit_code == 2  # --json lists checks only


def test_batch_feedback_help_names_no_option_batch_lacks():
    helped = " ".join(invoke("batch", "--help").output.split())
    assert "--gradescope" not in helped and "--feedback" in helped


def test_a_hint_outside_a_workspace_creates_nothing(tmp_path):
    ran = kvgrade("hint", "decode_mask", cwd=tmp_path)
    assert ran.returncode == 2 and "not a workspace" in ran.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_hint_inside_a_workspace_is_logged(tmp_path):
    assert invoke("start", tmp_path / "ws", "-e", "decode_mask").exit_code == 0
    out = invoke("hint", "decode_mask", tmp_path / "ws")
    assert out.exit_code == 0 and out.output.startswith("hint 1 of ")
    assert (tmp_path / "ws" / ".kvgrade" / "hints.jsonl").is_file()


def test_a_hint_for_an_exercise_the_workspace_lacks_spends_nothing(tmp_path):
    assert invoke("start", tmp_path / "ws", "-e", "decode_mask").exit_code == 0
    out = invoke("hint", "tree_mask", tmp_path / "ws")
    assert out.exit_code == 2 and "holds no tree_mask (its exercises: decode_mask)" in out.output, out.output
    assert not (tmp_path / "ws" / ".kvgrade" / "hints.jsonl").exists()


def test_batch_help_says_one_seed_for_the_whole_batch_and_classroom_that_install_is_required():
    batch = " ".join(invoke("batch", "--help").output.split())
    assert "one fresh, unpredictable seed for the whole batch" in batch and "for each grading" not in batch
    classroom = " ".join(invoke("classroom", "--help").output.split())
    assert "Required: what the workflow pip-installs, pinned" in classroom and "source distribution" not in classroom


def zipped(tmp_path, files: dict) -> Path:
    archive = tmp_path / "cand.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, source in files.items():
            zf.writestr(name, source)
    return archive


def test_an_empty_zip_is_said_to_be_empty_as_an_empty_folder_is(tmp_path):
    empty = zipped(tmp_path, {})
    out = invoke("grade", empty, "-e", "decode_mask")
    assert out.exit_code == 2 and f"{empty} is empty" in out.output and "holds no exercise" not in out.output
    assert len(out.output.strip().splitlines()) == 1, out.output


def test_a_zip_with_two_top_folders_names_them_and_the_rule(tmp_path):
    archive = zipped(tmp_path, {"take_home/decode_mask.py": (SOLUTIONS / "decode_mask.py").read_text(),
                                "scratch/notes.py": "x = 1\n"})
    out = invoke("grade", archive)
    assert out.exit_code == 2
    for needle in ("holds no exercise module", "scratch/", "take_home/", "single top folder",
                   "take_home/ holds exercise modules"):
        assert needle in out.output, (needle, out.output)
    (tmp_path / "both").mkdir()
    both = zipped(tmp_path / "both", {f"{top}/decode_mask.py": "x = 1\n" for top in ("a", "b")})
    out = invoke("grade", both)
    assert out.exit_code == 2 and "a/, b/ hold exercise modules" in out.output, out.output
    assert "use kvgrade batch" in out.output  # a newcomer pass: several submissions in one folder are a batch
    assert "kvgrade batch" not in invoke("grade", archive).output  # one folder of modules beside notes is not


@pytest.mark.slow
@pytest.mark.parametrize("inside", ["decode_mask.py", "take_home/decode_mask/decode_mask.py"])
def test_a_zip_is_reported_by_its_path_inside_the_submission(tmp_path, inside):
    archive = zipped(tmp_path, {inside: (SOLUTIONS / "decode_mask.py").read_text()})
    out = invoke("grade", archive, "-e", "decode_mask", "--check", "plain_decode", "--json", "-")
    (ex,) = json.loads(out.output)["exercises"]
    assert ex["module"] == str(archive / inside) and "kvgrade-zip-" not in out.output


@pytest.mark.slow
def test_a_workspace_shows_its_own_exercises_and_requires_none(tmp_path):
    ws = tmp_path / "ws"
    assert invoke("start", ws, "-e", "decode_mask,tree_mask").exit_code == 0
    (ws / "tree_mask" / "tree_mask.py").write_text((SOLUTIONS / "tree_mask.py").read_text())
    ran = kvgrade("grade", ws, "--json", "-", cwd=tmp_path)
    data = json.loads(ran.stdout)
    assert [e["id"] for e in data["exercises"]] == ["decode_mask", "tree_mask"]
    assert not any(e["required"] for e in data["exercises"]) and data["overall"]["level"] == "strong_hire"
    assert "showing this workspace's exercises (decode_mask, tree_mask)" in ran.stderr
    chosen = json.loads(kvgrade("grade", ws, "-e", "decode_mask", "--json", "-", cwd=tmp_path).stdout)
    assert [(e["id"], e["required"]) for e in chosen["exercises"]] == [("decode_mask", True)]


@pytest.mark.slow
def test_one_exercise_folder_of_a_workspace_shows_that_exercise_and_logs_the_run(tmp_path):
    """A newcomer ran `kvgrade grade .` inside ws/decode_mask: eleven other exercises "not attempted", no run
    logged. Now the folder grades as that exercise of its workspace, in one line."""
    from grader import timeline
    ws = tmp_path / "ws"
    assert invoke("start", ws, "-e", "decode_mask,tree_mask").exit_code == 0
    (ws / "decode_mask" / "decode_mask.py").write_text((SOLUTIONS / "decode_mask.py").read_text())
    ran = kvgrade("grade", ".", "--json", "-", cwd=ws / "decode_mask")
    assert ran.returncode == 0, ran.stderr
    assert [e["id"] for e in json.loads(ran.stdout)["exercises"]] == ["decode_mask"]
    assert "grading decode_mask alone, one exercise's folder of the workspace ws" in ran.stderr
    assert [a["exercise"] for a in timeline.attempts(ws)] == ["decode_mask"]


@pytest.mark.slow
def test_batch_shows_a_workspace_as_grade_does_and_writes_nothing_into_it(tmp_path):
    """`batch` over a workspace listed all twelve exercises, nine outside its set "not attempted"."""
    from grader import timeline
    ws = tmp_path / "cohort" / "gina"
    ws.parent.mkdir()
    assert invoke("start", ws, "-e", "decode_mask,tree_mask").exit_code == 0
    (ws / "decode_mask" / "decode_mask.py").write_text((SOLUTIONS / "decode_mask.py").read_text())
    (ws.parent / "bob").mkdir()  # a second student: the cohort folder is a folder of submissions
    (ws.parent / "bob" / "decode_mask.py").write_text((SOLUTIONS / "decode_mask.py").read_text())
    ran = kvgrade("batch", tmp_path / "cohort", "--out", tmp_path / "out", "--jobs", "1", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    saved = json.loads((tmp_path / "out" / "gina" / "result.json").read_text())
    assert [e["id"] for e in saved["exercises"]] == ["decode_mask", "tree_mask"]
    assert timeline.attempts(ws) == []


def test_api_grade_forwards_live_to_the_engine(monkeypatch, tmp_path):
    """The live room calls api.grade(..., live=True): the engine gets it."""
    seen = {}
    real = engine.grade

    def spy(*args, **kwargs):
        seen.update(kwargs)
        kwargs.pop("live", None)
        return real(*args, **kwargs)
    monkeypatch.setattr(engine, "grade", spy)
    (tmp_path / "decode_mask.py").write_text((SOLUTIONS / "decode_mask.py").read_text())
    result = api.grade(tmp_path, ["decode_mask"], checks={"plain_decode"}, live=True)
    assert seen["live"] is True and result.exercise("decode_mask").checks[0].passed


def test_hints_are_not_offered_where_they_cannot_be_run(top_left_example, tmp_path):
    """Gradescope students and candidates holding a summary copy have no `kvgrade hint` to run."""
    result = api.grade(top_left_example, ["decode_mask"], checks={"plain_decode"})
    for fmt in ("gradescope", "markdown", "html"):
        text = api.report(result, fmt, feedback=None if fmt == "gradescope" else "summary")
        assert "kvgrade hint" not in text and "hints used" not in text, fmt


def test_the_classroom_readme_names_no_folder_and_says_how_it_is_graded(tmp_path):
    from grader.platforms.classroom import write_starter

    write_starter(tmp_path / "my_repo", ["decode_mask"], 7, "hire", install="kvgrade-grader==0.1.0")
    readme = (tmp_path / "my_repo" / "README.md").read_text()
    assert "self-study workspace" not in readme and "my_repo" not in readme and "kvgrade hint" not in readme
    assert "every push" in readme and "install kvgrade" in readme
    assert "kvgrade grade . -e decode_mask --seed 7 --fail-under hire" in readme


def test_every_command_is_a_thin_call_into_the_api():
    """No command body grades, renders or neutralises by itself: those are the API's."""
    source = (KIT / "grader" / "cli.py").read_text()
    for private in ("engine", "neutralized", "for_candidate", "render.html", "render.markdown", "grade_many"):
        assert private not in source, private


def test_notes_naming_a_hint_the_rubric_lacks_are_one_line(tmp_path):
    (tmp_path / "decode_mask.py").write_text((SOLUTIONS / "decode_mask.py").read_text())
    (tmp_path / "notes.toml").write_text("[decode_mask]\nhints = [99]\n")
    ran = kvgrade("grade", tmp_path, "-e", "decode_mask", "--check", "plain_decode", "--notes", tmp_path / "notes.toml",
                  cwd=tmp_path)
    assert ran.returncode == 2 and len(ran.stderr.splitlines()) == 1, ran.stderr
    assert ran.stderr.startswith("Error: ") and "--notes" in ran.stderr


def test_room_is_a_hidden_name_for_serve():
    assert " ".join(invoke("room", "--help").output.split()).startswith("Usage: main room [OPTIONS] DIR Run a live")
    assert not any(line.split()[:1] == ["room"] for line in invoke("--help").output.splitlines())  # only as serve


def test_an_exercise_named_twice_is_one_exercise(tmp_path):
    """Red team 14: -e X -e X graded X twice (two entries with one id, a notes template that is not TOML),
    and start with a repeated -e left a half-made folder behind an unrelated error."""
    out = tmp_path / "r.json"
    (tmp_path / "stub").mkdir()  # the stub, not attempted: quick, and still one entry per exercise
    (tmp_path / "stub" / "tree_mask.py").write_text(catalog.get("tree_mask").stub_path.read_text())
    done = CliRunner().invoke(main, ["grade", str(tmp_path / "stub"), "-e", "tree_mask", "-e",
                                     "tree_mask,tree_mask", "--json", str(out)])
    assert done.exit_code in (0, 1), done.output
    assert [e["id"] for e in json.loads(out.read_text())["exercises"]] == ["tree_mask"]
    started = CliRunner().invoke(main, ["start", str(tmp_path / "ws"), "-e", "tree_mask", "-e", "tree_mask"])
    assert started.exit_code == 0, started.output
    assert sorted(p.name for p in (tmp_path / "ws" / "tree_mask").iterdir() if p.suffix == ".py")


@pytest.mark.parametrize("command,absent,present", [
    ("verify", ["interview set", "rerun line"], ["Only these exercises"]),
    ("autograder", ["rerun line"], ["each one required"]),
    ("classroom", ["rerun line"], ["each one required"]),
    ("serve", ["Default: all"], ["Required to start a session"]),
    ("grade", [], ["the interview set", "rerun line"]),
])
def test_each_commands_help_says_what_its_options_mean_there(command, absent, present):
    """A newcomer's pass: verify's -e spoke of an interview set, Gradescope's and Classroom's --seed of rerun lines
    they never print, and serve's -e defaulted to all where a new session requires it."""
    text = " ".join(invoke(command, "--help").output.split())
    assert not [words for words in absent if words in text] and all(words in text for words in present), text


def test_grade_help_names_exactly_the_options_a_batch_of_several_paths_takes():
    """`grade` with several PATHs is a batch: its help names the batch's options, and no option a batch lacks."""
    said = main.commands["grade"].help.split("In a workspace")[0]
    batch = {o for p in main.commands["batch"].params for o in p.opts if o.startswith("--") and o != "--help"}
    grade_only = {o for p in main.commands["grade"].params for o in p.opts if o.startswith("--")} - batch
    assert all(o in said for o in batch - {"--exercise"}) and "-e" in said, batch
    assert not [o for o in grade_only if f"{o}," in said or f"{o} " in said], grade_only


def test_a_submission_graded_as_dot_is_titled_by_its_folder_s_name(tmp_path, monkeypatch):
    """`kvgrade grade .` from inside the submission: the JSON keeps the path as given (the contract), and every
    title (terminal, Markdown, HTML, notes) names the folder too, never a bare `.`."""
    folder = tmp_path / "alice_take_home"
    folder.mkdir()
    (folder / "tile_classification.py").write_bytes((KIT / "solutions" / "tile_classification.py").read_bytes())
    monkeypatch.chdir(folder)
    done = invoke("grade", ".", "-e", "tile_classification", "--seed", "3", "--json", tmp_path / "r.json",
                  "--markdown", tmp_path / "r.md", "--html", tmp_path / "r.html")
    assert done.exit_code == 0, done.output
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["submission"] == "." and saved["submission_name"] == "alice_take_home"
    assert "alice_take_home (.)" in done.output.splitlines()[0]
    assert (tmp_path / "r.md").read_text().startswith("# kvgrade report: `alice_take_home (.)`")
    assert "<title>kvgrade report: alice_take_home (.)</title>" in (tmp_path / "r.html").read_text()
