"""The three workflows as a new user meets them: interviewer, candidate, self-study (via the CLI)."""
import hashlib
import json
import math
import os
import pty
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

KIT = catalog.KIT_ROOT
MUTANTS = KIT / "solutions" / "mutants" / "decode_mask"
HIDDEN_INPUTS = ["decode_causal_mask(5, 7)", "T = 5", "509", "with T = 1 over S = 2"]


def _gradescope_points(checks, total_cents=1000):
    """The README's rule: the exercise's points in whole hundredths, shared over its checks in
    order (the first ones get the leftover cent), summed over the checks passed."""
    n = len(checks)
    cents = [total_cents // n + (i < total_cents % n) for i in range(n)]
    return sum(c for c, check in zip(cents, checks) if check["passed"]) / 100


def leaks(secret, text):
    """The secret appears as itself, not inside a longer number (a timing of 0.509 s is no leak)."""
    return re.search(r"(?<![\d.])" + re.escape(secret) + r"(?!\d)", text) is not None


def complete_exercises():
    """Exercises with every part in place (others may be half-built while the kit grows)."""
    return [e for e in catalog.exercises()
            if e.rubric_path.is_file() and e.stub_path.is_file() and e.hidden_checks.is_file()]


INTERVIEW_OTHERS = [e.id for e in complete_exercises() if e.id != "decode_mask"][:1]


def run(*args, ok=True):
    out = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    if ok:
        assert out.exit_code == 0, out.output
    return out


def separate_streams() -> CliRunner:
    """A runner with stderr apart from stdout (click 8.1 needs asking; 8.2 always does)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def reference_submission(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", root / "decode_mask.py")
    shutil.copyfile(KIT / "solutions" / "test_decode_mask.py", root / "test_decode_mask.py")
    return root


def top_left_submission(root: Path) -> Path:
    root.mkdir(parents=True)
    shutil.copyfile(MUTANTS / "top_left.py", root / "decode_mask.py")
    shutil.copyfile(MUTANTS / "t1_only_tests" / "test_decode_mask.py", root / "test_decode_mask.py")
    return root


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The top-left submission graded once into every format, and the reference into JSON."""
    tmp = tmp_path_factory.mktemp("graded")
    sub = top_left_submission(tmp / "ada")
    out = {name: tmp / name for name in ("result.json", "report.html", "report.md", "junit.xml", "gradescope.json")}
    terminal = run("grade", "--seed", "0", sub, "-e", "decode_mask", "--json", out["result.json"], "--html",
                   out["report.html"],
                   "--markdown", out["report.md"], "--junit", out["junit.xml"],
                   "--gradescope", out["gradescope.json"]).output
    # the reference, graded as an interview set: decode_mask plus one exercise it does not attempt
    reference, interview_set = tmp / "reference.json", ["decode_mask"] + INTERVIEW_OTHERS
    run("grade", "--seed", "0", reference_submission(tmp / "ref"), "-e", ",".join(interview_set), "--json", reference)
    return {"tmp": tmp, "sub": sub, "terminal": terminal, "reference": reference, **out}


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_grade_writes_every_format_from_one_result(graded):
    data = json.loads(graded["result.json"].read_text())
    assert data["overall"]["level"] == "weak"
    assert "top_left_alignment" in graded["terminal"] and "rerun: kvgrade grade" in graded["terminal"]
    page = graded["report.html"].read_text()
    assert "<svg" in page and "top_left_alignment" in page
    assert "**Overall: weak**" in graded["report.md"].read_text()
    checks = data["exercises"][0]["checks"]
    assert ET.parse(graded["junit.xml"]).getroot().get("failures") == str(sum(not c["passed"] for c in checks))
    scores = json.loads(graded["gradescope.json"].read_text())
    assert (scores["score"], scores["max_score"]) == (_gradescope_points(checks), 10.0)
    missed = ["top_left_past_one_query", "int16_positions", "crashes_on_numpy_ints", "narrow_size_beside_python_int"]
    score_line = f"own tests: caught 1 of 5 known mistakes (20%); missed: {', '.join(missed)}"
    assert data["exercises"][0]["own_tests"]["missed"] == missed
    for text in (graded["terminal"], page, graded["report.md"].read_text().lower()):
        assert score_line in text


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_the_reproduce_line_reruns_exactly_one_failing_check(graded):
    data = json.loads(graded["result.json"].read_text())
    line = next(l for l in graded["report.md"].read_text().splitlines() if "--check random_shapes" in l)
    args = line.split("`")[1].split()[1:]
    assert args[:2] == ["grade", str(graded["sub"])]
    again = json.loads(run(*args, "--json", "-").output)
    (check,) = again["exercises"][0]["checks"]
    first = next(c for c in data["exercises"][0]["checks"] if c["id"] == "random_shapes")
    assert check == {**first, "seconds": check["seconds"]}


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_notes_template_then_report_records_the_interview(graded, tmp_path):
    template = run("notes", graded["reference"]).output
    assert "[decode_mask]" in template and "# names_library_conventions = true" in template
    filled = (template.replace("# names_library_conventions = true", "names_library_conventions = false")
              .replace("# explains_why_decode_hides_the_bug = true", "explains_why_decode_hides_the_bug = true")
              .replace('notes = ""', 'notes = "Found the offset quickly; unsure which library uses which."'))
    notes = tmp_path / "notes.toml"
    notes.write_text(filled)
    page, md, js = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "r.json"
    before = json.loads(graded["reference"].read_text())
    assert (before["exercises"][0]["level"], before["exercises"][0]["provisional"]) == ("strong_hire", True)
    run("report", graded["reference"], "--notes", notes, "--html", page, "--markdown", md, "--json", js)
    after = json.loads(js.read_text())
    ex = after["exercises"][0]
    assert ex["id"] == "decode_mask"
    assert (ex["level"], ex["provisional"]) == ("hire", False)  # a missed strong_hire observation
    assert after["overall"]["level"] == ("weak" if INTERVIEW_OTHERS else "hire")  # the set's other one is not done
    status = {c["id"]: c["status"] for c in ex["criteria"]}
    assert status["names_library_conventions"] == "missed" and status["explains_why_decode_hides_the_bug"] == "met"
    assert status["maps_rule_to_tiles"] == "to_observe"
    assert [c["passed"] for c in ex["checks"]] == [c["passed"] for c in before["exercises"][0]["checks"]]
    assert "unsure which library uses which" in page.read_text() and "unsure which library" in md.read_text()
    again = run("notes", js).output  # the template of a noted result keeps what was recorded
    assert "names_library_conventions = false" in again and "unsure which library" in again


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_notes_that_match_nothing_are_warned_about_and_a_misspelt_criterion_refused(graded, tmp_path):
    notes = tmp_path / "notes.toml"
    notes.write_text("[tree_mask]\nnotes = 'x'\n")
    out = separate_streams().invoke(main, ["report", str(graded["reference"]), "--notes", str(notes)])
    assert out.exit_code == 0 and "[tree_mask], which is not in this result" in out.stderr
    notes.write_text("[decode_mask.observed]\nnames_library_convention = true\n")  # a typo would silently not count
    out = separate_streams().invoke(main, ["report", str(graded["reference"]), "--notes", str(notes)])
    assert out.exit_code == 2
    assert "names_library_convention is not an observed criterion of decode_mask; its observed criteria:" in out.stderr


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_summary_feedback_hides_hidden_inputs_in_every_format(graded, tmp_path):
    """What a candidate gets: from a saved detailed result (the same redaction as grade --feedback summary)."""
    files = {name: tmp_path / name for name in ("r.json", "r.html", "r.md", "j.xml", "g.json")}
    out = run("report", graded["result.json"], "--feedback", "summary", "--json", files["r.json"],
              "--html", files["r.html"], "--markdown", files["r.md"], "--junit", files["j.xml"],
              "--gradescope", files["g.json"]).output
    for text in [out] + [f.read_text() for f in files.values()]:
        for secret in HIDDEN_INPUTS + ["--check", "listen_for", "Listen for"]:
            assert not leaks(secret, text), secret
        assert "random_shapes" in text
    data = json.loads(files["r.json"].read_text())
    checks = data["exercises"][0]["checks"]
    assert data["feedback"] == "summary" and all(c["case"] is None and c["picture"] is None for c in checks)
    detailed = json.loads(graded["result.json"].read_text())["exercises"][0]["checks"]
    assert [c["passed"] for c in checks] == [c["passed"] for c in detailed]
    assert all(c["description"] for c in checks)


@pytest.mark.slow  # grades several submissions in full
def test_batch_ranks_candidates_and_survives_broken_submissions(tmp_path):
    folder = tmp_path / "candidates"
    reference_submission(folder / "grace")
    top_left_submission(folder / "ada")
    (folder / "broken").mkdir()
    (folder / "broken" / "decode_mask.py").write_text("def decode_causal_mask(T, S)\n    return None\n")
    (folder / "stub").mkdir()
    shutil.copyfile(KIT / "exercises" / "decode_mask" / "decode_mask.py", folder / "stub" / "decode_mask.py")
    not_a_folder = tmp_path / "notes.txt"
    not_a_folder.write_text("not a submission")
    out = tmp_path / "out"
    result = separate_streams().invoke(
        main, ["grade", "--seed", "0", str(folder), str(not_a_folder), "-e", "decode_mask", "--out", str(out),
               "--jobs", "2"])
    assert result.exit_code == 0, result.stdout + result.stderr
    ranking = [line.split()[1] for line in result.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert ranking[:2] == ["grace", "ada"] and ranking[-1] == "notes.txt" and len(ranking) == 5
    summary = (out / "summary.md").read_text()
    assert "| 1 | `grace` | **strong hire (provisional: 3 observations)** |" in summary
    assert "[report](grace/report.html)" in summary
    assert "broken: " in summary and "not a folder or a .zip" in summary and "not attempted" in summary
    assert "SubmissionError" not in summary  # the reason in its own words, not a Python class name
    broken = json.loads((out / "broken" / "result.json").read_text())["exercises"][0]
    assert broken["status"] == "error" and "SyntaxError" in broken["error"]
    index = (out / "index.html").read_text()
    for name in ("grace", "ada", "broken", "stub"):
        assert f'href="{name}/report.html"' in index and (out / name / "report.html").is_file()


def test_each_numbered_step_of_a_workspace_or_bundle_readme_starts_its_own_line(tmp_path):
    """A newcomer pass: "... they are part of the grade.3. Leave an exercise ..." (a template's newline lost)."""
    run("start", tmp_path / "w", "-e", "decode_mask")
    run("bundle", tmp_path / "b", "-e", "decode_mask")
    for readme in (tmp_path / "w" / "README.md", tmp_path / "b" / "README.md"):
        text = readme.read_text()
        assert not re.search(r"\S\d\. [A-Z]", text), re.search(r".{40}\S\d\. [A-Z].{20}", text)
        assert re.findall(r"^(\d)\. ", text, re.M)[:3] == ["1", "2", "3"]


def test_batch_of_nothing_is_a_usage_error_naming_it(tmp_path):
    out = CliRunner().invoke(main, ["batch", str(tmp_path)])
    assert out.exit_code == 2 and f"no submission found in {tmp_path}" in " ".join(out.output.split())


def test_a_named_folder_that_holds_no_candidate_is_a_submission_never_dropped(tmp_path):
    """A newcomer pass: `batch emptycohort cohort/alice` graded alice alone and said nothing of the empty folder."""
    from grader.batch import submissions

    (tmp_path / "empty").mkdir()
    for name in ("alice", "bob"):
        (tmp_path / "cohort" / name).mkdir(parents=True)
        (tmp_path / "cohort" / name / "decode_mask.py").write_text("x = 1\n")
    found = submissions([str(tmp_path / "empty"), str(tmp_path / "cohort")])
    assert found == [tmp_path / "empty", tmp_path / "cohort" / "alice", tmp_path / "cohort" / "bob"]


def test_several_paths_refuse_single_report_options(tmp_path):
    out = CliRunner().invoke(main, ["grade", str(tmp_path), str(tmp_path), "--html", "x.html"])
    assert out.exit_code == 2 and "--html applies to one submission" in out.output


@pytest.mark.slow  # two whole gradings or more: the full suite runs it, the fast loop stays under a minute
def test_start_makes_a_workspace_for_pytest_and_the_grader(tmp_path):
    ws = tmp_path / "ws"
    run("start", ws, "-e", "decode_mask")
    assert sorted(p.name for p in (ws / "decode_mask").iterdir()) == [
        "README.md", "decode_mask.py", "test_decode_mask_public.py"]
    assert "kvgrade grade" in (ws / "README.md").read_text()
    graded = json.loads(run("grade", "--seed", "0", ws, "--json", "-", "-e", "decode_mask").output)
    assert graded["exercises"][0]["status"] == "not_attempted" and graded["overall"]["level"] == "weak"
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", ws / "decode_mask" / "decode_mask.py")
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ws)],
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert tests.returncode == 0 and " passed" in tests.stdout, tests.stdout + tests.stderr
    again = CliRunner().invoke(main, ["start", str(ws)])
    assert again.exit_code == 2 and "not an empty folder" in again.output


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_bundle_holds_prompts_stubs_and_public_tests_but_nothing_secret(tmp_path):
    zipped = tmp_path / "interview.zip"
    chosen = complete_exercises()
    run("bundle", zipped, "-e", ",".join(e.id for e in chosen))
    secret_roots = [KIT / "solutions", KIT / "grader" / "hidden", KIT / "rubrics"]
    secrets = {_digest(p.read_bytes()) for root in secret_roots for p in root.rglob("*") if p.is_file()}
    with zipfile.ZipFile(zipped) as zf:
        names = zf.namelist()
        contents = {name: zf.read(name) for name in names}
    assert "interview/README.md" in names and "interview/pytest.ini" in names
    readme = contents["interview/README.md"].decode()
    assert "How to submit" in readme and "kvgrade" not in readme
    for ex in chosen:
        for path in (ex.prompt_path, ex.stub_path, *ex.public_tests, *ex.helper_files):
            assert contents[f"interview/{ex.id}/{path.name}"] == path.read_bytes()
    for name, data in contents.items():
        assert _digest(data) not in secrets, f"{name} is a copy of a solution, mutant, hidden check or rubric"
        assert not any(word in name for word in ("solution", "mutant", "hidden", "rubric", "oracle"))
    folder = tmp_path / "as_folder"
    run("bundle", folder, "-e", "decode_mask")
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "decode_mask", "pytest.ini"]
    assert CliRunner().invoke(main, ["bundle", str(folder)]).exit_code == 2


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_an_interview_set_counts_an_exercise_not_attempted_as_weak(graded):
    if not INTERVIEW_OTHERS:
        pytest.skip("only one exercise in the kit")
    data = json.loads(graded["reference"].read_text())
    status = {e["id"]: (e["status"], e["level"], e["required"]) for e in data["exercises"]}
    assert status == {"decode_mask": ("graded", "strong_hire", True),
                      INTERVIEW_OTHERS[0]: ("not_attempted", "weak", True)}
    assert data["overall"]["level"] == "weak"
    assert f"# {INTERVIEW_OTHERS[0]}: not attempted" in run("notes", graded["reference"]).output


def test_report_rejects_a_file_that_is_not_a_result(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "something/else"}')
    out = CliRunner().invoke(main, ["report", str(bad)])
    assert out.exit_code == 2 and "not a kvgrade result" in out.output


def test_the_bundle_readme_says_how_to_submit_and_that_every_exercise_counts(tmp_path):
    run("bundle", tmp_path / "b", "-e", "decode_mask")
    readme = " ".join((tmp_path / "b" / "README.md").read_text().split())
    assert "Send back this whole folder, or a zip of it" in readme
    assert "one you do not attempt counts as weak" in readme
    run("start", tmp_path / "w", "-e", "decode_mask")  # self-study: nothing is counted against anyone
    assert "counts as weak" not in (tmp_path / "w" / "README.md").read_text()


@pytest.mark.slow
def test_the_command_bundle_prints_grades_a_returned_bundle_with_every_exercise_counted(tmp_path):
    """A newcomer pass: a returned bundle graded without -e left tile_classification out and gave hire, though
    the bundle's README says an exercise not attempted counts as weak. bundle prints the command that holds it."""
    printed = run("bundle", tmp_path / "b", "-e", "decode_mask,tile_classification").output
    command = re.search(r"kvgrade grade PATH (-e \S+)", printed)
    assert command, printed
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", tmp_path / "b" / "decode_mask" / "decode_mask.py")
    out = tmp_path / "r.json"
    run("grade", tmp_path / "b", *command.group(1).split(), "--seed", "0", "--json", out)
    data = json.loads(out.read_text())
    assert [e["id"] for e in data["exercises"]] == ["decode_mask", "tile_classification"]
    assert data["overall"]["level"] == "weak"  # the stub left as sent counts


@pytest.mark.slow
def test_a_zipped_workspace_graded_as_its_readme_says_shows_its_own_exercises(tmp_path):
    """A newcomer pass: `kvgrade grade ws.zip`, as the workspace README offered, listed all twelve exercises."""
    run("start", tmp_path / "ws", "-e", "decode_mask,tree_mask")
    readme = " ".join((tmp_path / "ws" / "README.md").read_text().split())
    command = re.search(r"`kvgrade grade (\S+\.zip) (-e \S+)`", readme)
    assert command, readme
    shutil.make_archive(str(tmp_path / "ws"), "zip", tmp_path, "ws")
    out = tmp_path / "r.json"
    run("grade", tmp_path / "ws.zip", *command.group(2).split(), "--seed", "0", "--json", out)
    assert [e["id"] for e in json.loads(out.read_text())["exercises"]] == ["decode_mask", "tree_mask"]


@pytest.mark.slow
def test_gradescope_points_add_up_exactly(tmp_path):
    """tree_mask has 12 checks: 10 points do not split evenly, yet every total is whole."""
    out = tmp_path / "g.json"
    run("grade", "--seed", "0", KIT / "solutions", "-e", "tree_mask,decode_mask", "--gradescope", out)
    data = json.loads(out.read_text())
    assert (data["score"], data["max_score"]) == (20.0, 20.0)
    for exercise in ("tree_mask", "decode_mask"):
        tests = [t for t in data["tests"] if t["name"].startswith(exercise + ":")]
        assert math.fsum(t["max_score"] for t in tests) == 10.0
        assert all(round(t["max_score"], 2) == t["max_score"] for t in tests)  # whole hundredths
    assert math.fsum(t["score"] for t in data["tests"]) == data["score"]


@pytest.mark.slow
def test_gradescope_output_is_student_facing_by_default(graded, tmp_path):
    student, detailed = tmp_path / "s.json", tmp_path / "d.json"
    run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--gradescope", student)
    run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--gradescope", detailed, "--feedback", "detail")
    text = student.read_text()
    assert not any(leaks(secret, text) for secret in HIDDEN_INPUTS + ["--check", "Overall level"]), text
    assert "decode_causal_mask(5, 7)" in detailed.read_text()
    checks = json.loads(run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--json", "-").output)
    points = _gradescope_points(checks["exercises"][0]["checks"])
    assert json.loads(text)["score"] == json.loads(detailed.read_text())["score"] == points


@pytest.mark.slow
def test_summary_feedback_hides_levels_unless_shown(graded):
    hidden = run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--feedback", "summary").output
    data = json.loads(run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--feedback", "summary",
                          "--json", "-").output)
    checks = data["exercises"][0]["checks"]
    assert "weak" not in hidden and "overall" not in hidden
    assert f"{sum(c['passed'] for c in checks)}/{len(checks)} checks" in hidden
    assert data["overall"]["level"] is None and data["levels_hidden"] is True
    assert all(e["level"] is None and e["criteria"] == [] for e in data["exercises"])
    shown = run("grade", "--seed", "0", graded["sub"], "-e", "decode_mask", "--feedback", "summary",
                "--show-levels").output
    assert "overall: weak" in shown
    assert not any(leaks(secret, hidden + shown) for secret in HIDDEN_INPUTS)


@pytest.mark.slow
def test_progress_dots_end_before_the_summary(tmp_path):
    """On a terminal, the dots of the checks get their own line; the header starts a new one."""
    leader, follower = pty.openpty()
    child = subprocess.Popen([sys.executable, "-m", "grader", "grade", "--seed", "0", str(KIT / "solutions"), "-e",
                              "decode_mask"],
                             stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the child is done
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    assert child.wait(timeout=120) == 0
    lines = click.unstyle(output.decode()).replace("\r", "").splitlines()
    dots = sum(len(line) for line in lines if line and set(line) == {"."})
    assert dots == len(catalog.get("decode_mask").checks), lines  # one dot per check
    assert any(line.startswith("kvgrade ") for line in lines), lines


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_exercises_outside_the_interview_set_are_left_out_as_the_readme_says(graded):
    data = json.loads(graded["reference"].read_text())
    assert [e["id"] for e in data["exercises"]] == ["decode_mask"] + INTERVIEW_OTHERS
    readme = " ".join((KIT / "README.md").read_text().split())
    assert "exercises outside it are left out of the result" in readme
