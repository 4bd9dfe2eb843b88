"""Interview mode: staged hints, the attempt timeline, the interviewer's sheet, through the CLI."""
import json
import re
import os
import shutil
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from grader import catalog, timeline
from grader.cli import main
from grader.notes import Notes
from grader.render.interview import hint_lines, timeline_lines
from grader.result import ExerciseResult, Result

KIT = catalog.KIT_ROOT
MUTANTS = KIT / "solutions" / "mutants" / "decode_mask"
T0 = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)


def run(*args, code=0):
    out = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert out.exit_code == code, out.output
    return out.output


def attempt(exercise, passed, total, diagnoses=(), level="weak"):
    e = ExerciseResult(exercise, "graded", level=level,
                       checks=[type("C", (), {"passed": i < passed})() for i in range(total)])
    e.diagnoses = [type("D", (), {"id": d})() for d in diagnoses]
    return Result(seed=0, submission="ws", exercises=[e])


# ---------------------------------------------------------------------------- hints

def test_hint_prints_the_hints_in_order_logs_them_then_says_all_were_shown(tmp_path):
    ws = tmp_path / "ws"
    run("start", ws, "-e", "decode_mask")
    hints = [" ".join(h.text.split()) for h in catalog.get("decode_mask").rubric.hints]
    for i, text in enumerate(hints, 1):
        assert run("hint", "decode_mask", ws).strip() == f"hint {i} of {len(hints)} for decode_mask: {text}"
    again = run("hint", "decode_mask", ws)
    assert f"All {len(hints)} hints" in again and hints[-1] in again
    logged = [json.loads(line) for line in (ws / ".kvgrade" / "hints.jsonl").read_text().splitlines()]
    assert [r["hint"] for r in logged] == list(range(1, len(hints) + 1))
    assert timeline.hints_seen(ws) == {"decode_mask": len(hints)}


def test_hint_from_one_exercises_folder_logs_in_its_workspace_and_outside_one_says_what_to_do(tmp_path,
                                                                                                monkeypatch):
    """A newcomer pass: `kvgrade grade .` worked in ws/decode_mask, `kvgrade hint decode_mask` there refused
    with a sentence that read as cut off."""
    ws = tmp_path / "ws"
    run("start", ws, "-e", "decode_mask")
    monkeypatch.chdir(ws / "decode_mask")
    assert run("hint", "decode_mask").startswith("hint 1 of")
    assert timeline.hints_seen(ws) == {"decode_mask": 1} and not (ws / "decode_mask" / ".kvgrade").exists()
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["hint", "decode_mask"])
    assert out.exit_code == 2 and "kvgrade hint decode_mask WORKSPACE" in " ".join(out.output.split())
    assert not (tmp_path / ".kvgrade").exists()


@pytest.mark.parametrize("args, message", [
    (["hint", "no_such_exercise"], "unknown exercise"),
    (["hint", "decode_mask", "/no/such/folder"], "is not a folder"),
    (["show", "no_such_exercise", "--interviewer"], "unknown exercise"),
    (["start", "x", "--minutes", "0"], "--minutes"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 2 and message in out.output and "Traceback" not in out.output


def test_hint_count_in_notes_means_the_first_n_hints(tmp_path):
    notes = tmp_path / "notes.toml"
    notes.write_text("[decode_mask]\nhints = 2\n[tree_mask]\nhints = [1, 3]\n")
    loaded = Notes.load(notes)
    assert loaded.hints("decode_mask") == (0, 1) and loaded.hints("tree_mask") == (0, 2)


@pytest.mark.slow
def test_only_recorded_hints_cost_a_level_and_the_candidates_log_never_does(tmp_path):
    ws = tmp_path / "ws"
    run("start", ws, "-e", "decode_mask")
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", ws / "decode_mask" / "decode_mask.py")
    shutil.copyfile(KIT / "solutions" / "test_decode_mask.py", ws / "decode_mask" / "test_decode_mask.py")
    for _ in range(4):  # every hint, printed and logged by the candidate
        run("hint", "decode_mask", ws)
    logged_only = json.loads(run("grade", "--seed", "0", ws, "-e", "decode_mask", "--json", "-"))["exercises"][0]
    assert logged_only["level"] == "strong_hire" and logged_only["timeline"]["hints_seen"] == 4
    assert logged_only["hints_given"] == [] and logged_only["hints_offered"] == 4

    notes = tmp_path / "notes.toml"
    caps = [h.caps for h in catalog.get("decode_mask").rubric.hints]
    notes.write_text("[decode_mask]\nhints = 4\n")
    recorded = json.loads(run("grade", "--seed", "0", ws, "-e", "decode_mask", "--notes", notes, "--json",
                              "-"))["exercises"][0]
    assert recorded["hints_given"] == [1, 2, 3, 4]
    assert recorded["level"] == min(caps, key=["weak", "hire", "strong_hire"].index) == "hire"
    assert "hint 3 given" in recorded["reason"]


# ---------------------------------------------------------------------------- the interviewer's sheet

@pytest.mark.parametrize("exercise", catalog.exercises(), ids=lambda e: e.id)
def test_show_interviewer_prints_the_sheet_of_every_exercise(exercise):
    text = " ".join(run("show", exercise.id, "--interviewer").split())
    rubric = exercise.rubric
    needles = [rubric.title, *(h.text for h in rubric.hints), *(c.expect for c in rubric.checkpoints),
               *(c.text for c in rubric.criteria if c.observed),
               *(f.ask for f in rubric.follow_ups), *(f.listen_for for f in rubric.follow_ups)]
    for needle in needles:
        assert " ".join(needle.split()) in text, needle
    time_box = text[text.index("Time box:"):].split(".")[0]
    assert ("take-home" in time_box) == rubric.take_home and str(rubric.time_box_minutes) in time_box
    assert all(e.id in text for e in catalog.exercises())  # the kit's sizing


def test_sizing_puts_the_fused_kernel_in_take_home_and_decode_mask_in_a_slot():
    text = run("show", "decode_mask", "--interviewer")
    sizing = text[text.index("Sizing of the kit:"):]
    assert "fused_attention" in sizing and "take-home" in sizing.split("fused_attention")[1].splitlines()[0]
    assert "fits a 45-minute slot" in sizing.split("decode_mask")[1].splitlines()[0]
    for ex in catalog.exercises():  # a newcomer pass: "60 min of work: fits a 45-60 minute slot, with the talk"
        line = sizing.split(ex.id, 1)[1].splitlines()[0]
        slot = re.search(r"fits a (\d+)-minute slot", line)
        assert ex.rubric.take_home or not slot or int(slot.group(1)) - ex.rubric.time_box_minutes >= 15, line
    listed = run("list")  # the same minutes as `kvgrade list`, named as the work's, not the slot's
    minutes = next(line for line in listed.splitlines() if line.startswith("decode_mask")).split()[1]
    assert f"Time box: {minutes} min of work" in text, text


def test_the_bundle_holds_no_hint_and_no_interviewer_sheet(tmp_path):
    run("bundle", tmp_path / "bundle")
    text = " ".join(" ".join(p.read_text().split()) for p in (tmp_path / "bundle").rglob("*") if p.is_file())
    for ex in catalog.exercises():
        r = ex.rubric
        for secret in [*(h.text for h in r.hints), *(c.expect for c in r.checkpoints)]:
            assert " ".join(secret.split()) not in text, secret
    assert "Interviewer's sheet" not in text and not list((tmp_path / "bundle").rglob(".kvgrade"))


# ---------------------------------------------------------------------------- the log, read as hostile data

def test_timeline_from_a_log_first_correct_answer_and_diagnoses_fixed(tmp_path):
    timeline.create(tmp_path, ["decode_mask"], 60, when=T0)
    timeline.record_attempt(tmp_path, attempt("decode_mask", 3, 10, ["top_left_alignment"]), T0 + timedelta(minutes=4))
    timeline.record_attempt(tmp_path, attempt("decode_mask", 6, 10, ["top_left_alignment"]), T0 + timedelta(minutes=6))
    timeline.record_attempt(tmp_path, attempt("decode_mask", 10, 10, level="hire"), T0 + timedelta(minutes=9))
    session = timeline.summarise(tmp_path, attempt("decode_mask", 10, 10), when=T0 + timedelta(minutes=12))
    assert session["minutes"] == 60 and session["used_minutes"] == 12.0
    t = session["exercises"]["decode_mask"]
    assert t["runs"] == 3 and t["points"] == [[4.0, 3, 10], [6.0, 6, 10], [9.0, 10, 10]]
    assert t["first_correct_minutes"] == 9.0
    assert t["diagnoses"] == [{"id": "top_left_alignment", "at": "12:04", "fixed": "12:09"}]


def test_malformed_and_hostile_log_lines_are_skipped(tmp_path):
    timeline.create(tmp_path, ["decode_mask"], None, when=T0)
    good = {"time": (T0 + timedelta(minutes=1)).isoformat(), "exercise": "decode_mask", "passed": 2, "total": 5,
            "diagnoses": [], "level": "weak", "hints": 0}
    bad = [b"not json", b"[1, 2]", b"\xff\xfe",
           json.dumps({**good, "passed": 9}).encode(),  # more passed than run
           json.dumps({**good, "exercise": "../../etc"}).encode(),
           json.dumps({**good, "time": "yesterday"}).encode(),
           json.dumps({**good, "level": "<script>"}).encode(),
           json.dumps({**good, "diagnoses": [{"x": 1}]}).encode(),
           b"[" * 100_000]
    (tmp_path / ".kvgrade" / "attempts.jsonl").write_bytes(b"\n".join(bad + [json.dumps(good).encode()]))
    assert [(r["passed"], r["total"]) for r in timeline.attempts(tmp_path)] == [(2, 5)]


@pytest.mark.parametrize("edge", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_times_that_cannot_be_moved_to_utc_are_no_times(tmp_path, edge):
    """Red team 11: a start or an attempt within a day of year 1 or 9999, with a zone, parsed but overflowed
    when moved to UTC, so every later grade in that folder ended in a traceback."""
    timeline.create(tmp_path, ["decode_mask"], None, when=T0)
    good = {"time": (T0 + timedelta(minutes=1)).isoformat(), "exercise": "decode_mask", "passed": 2, "total": 5,
            "diagnoses": [], "level": "weak", "hints": 0}
    log = tmp_path / ".kvgrade" / "attempts.jsonl"
    log.write_text(json.dumps({**good, "time": edge}) + "\n" + json.dumps(good) + "\n")
    assert [r["passed"] for r in timeline.attempts(tmp_path)] == [2]
    session = timeline.summarise(tmp_path, attempt("decode_mask", 3, 5), when=T0 + timedelta(minutes=2))
    assert session["exercises"]["decode_mask"]["points"] == [[1.0, 2, 5]]
    record = tmp_path / ".kvgrade" / "workspace.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "started": edge}))
    assert timeline.summarise(tmp_path, attempt("decode_mask", 3, 5)) is None  # no start: not a workspace


def test_a_log_past_the_cap_is_read_only_up_to_it(tmp_path):
    timeline.create(tmp_path, ["decode_mask"], None, when=T0)
    line = json.dumps({"time": (T0 + timedelta(minutes=1)).isoformat(), "exercise": "decode_mask", "passed": 1,
                       "total": 2, "diagnoses": [], "level": "weak", "hints": 0}) + "\n"
    copies = timeline.MAX_LOG_BYTES // len(line) + 500
    (tmp_path / ".kvgrade" / "attempts.jsonl").write_text(line * copies)
    assert len(timeline.attempts(tmp_path)) == timeline.MAX_LOG_BYTES // len(line)


def test_symlinked_or_special_logs_are_never_followed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(json.dumps({"started": T0.isoformat(), "minutes": 5}) + "\n")
    ws = tmp_path / "ws"
    (ws / ".kvgrade").mkdir(parents=True)
    (ws / ".kvgrade" / "workspace.json").symlink_to(secret)
    assert not timeline.is_workspace(ws)
    os.mkfifo(ws / ".kvgrade" / "attempts.jsonl")  # opening a FIFO to read would block: never read
    assert timeline.attempts(ws) == []
    (ws / ".kvgrade" / "hints.jsonl").symlink_to(secret)
    with pytest.raises(timeline.LogError):
        timeline.record_hint(ws, "decode_mask", 1)
    assert secret.read_text().count("\n") == 1  # not appended to through the link
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".kvgrade").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(timeline.LogError):
        timeline.record_hint(linked, "decode_mask", 1)
    assert not list(elsewhere.iterdir())


@pytest.mark.slow
def test_a_planted_fifo_or_hard_link_as_a_log_is_refused_at_once_and_nothing_outside_is_written(tmp_path):
    """Red team 10: a FIFO as attempts.jsonl hung `kvgrade grade` forever (a blocking open), and a
    hard link sent the log's line into a file outside the workspace."""
    import subprocess
    import sys

    ws = tmp_path / "ws"
    run("start", ws, "-e", "decode_mask")
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", ws / "decode_mask" / "decode_mask.py")
    os.mkfifo(ws / ".kvgrade" / "attempts.jsonl")
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(ws), "-e", "decode_mask", "--seed", "0"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "attempt not logged" in done.stderr and "not a regular file of its own" not in done.stdout, done.stderr
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    os.link(victim, ws / ".kvgrade" / "hints.jsonl")
    with pytest.raises(timeline.LogError, match="not a regular file of its own"):
        timeline.record_hint(ws, "decode_mask", 1)
    os.remove(ws / ".kvgrade" / "workspace.json")
    os.link(victim, ws / ".kvgrade" / "workspace.json")
    with pytest.raises(timeline.LogError, match="not a regular file of its own"):
        timeline.create(ws, ["decode_mask"], None, when=T0)  # a fresh log: never truncated through the link
    assert victim.read_text() == "keep\n"


# ---------------------------------------------------------------------------- a scripted session

@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """start --minutes 60, a wrong grade (top-left mask), a hint, a right grade with every report."""
    tmp = tmp_path_factory.mktemp("session")
    ws = tmp / "ws"
    run("start", ws, "-e", "decode_mask", "--minutes", "60")
    shutil.copyfile(MUTANTS / "top_left.py", ws / "decode_mask" / "decode_mask.py")
    shutil.copyfile(MUTANTS / "t1_only_tests" / "test_decode_mask.py", ws / "decode_mask" / "test_decode_mask.py")
    first = run("grade", "--seed", "0", ws, "-e", "decode_mask")
    hint = run("hint", "decode_mask", ws)
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", ws / "decode_mask" / "decode_mask.py")
    shutil.copyfile(KIT / "solutions" / "test_decode_mask.py", ws / "decode_mask" / "test_decode_mask.py")
    out = {name: tmp / name for name in ("result.json", "report.html", "report.md")}
    last = run("grade", "--seed", "0", ws, "-e", "decode_mask", "--json", out["result.json"], "--html",
               out["report.html"],
               "--markdown", out["report.md"])
    return {"ws": ws, "first": first, "hint": hint, "last": last, **out}


@pytest.mark.slow
def test_the_session_log_holds_both_runs_with_the_hint_between(session):
    wrong, right = timeline.attempts(session["ws"])
    assert wrong["passed"] < wrong["total"] and "top_left_alignment" in wrong["diagnoses"] and wrong["hints"] == 0
    assert right["passed"] == right["total"] and right["diagnoses"] == [] and right["hints"] == 1
    assert session["hint"].startswith("hint 1 of 4 for decode_mask:")


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_the_final_result_and_every_report_show_the_timeline_and_hints(session):
    data = json.loads(session["result.json"].read_text())
    e = data["exercises"][0]
    assert data["session"]["minutes"] == 60 and "candidate's machine" in data["session"]["kept_by"]
    assert e["timeline"]["runs"] == 2 and e["timeline"]["hints_seen"] == 1
    assert e["timeline"]["first_correct_minutes"] == e["timeline"]["points"][1][0]
    fixed = {d["id"]: d for d in e["timeline"]["diagnoses"]}["top_left_alignment"]
    assert fixed["fixed"] is not None
    assert e["level"] == "strong_hire"  # a hint in the candidate's log never costs a level
    for text in (session["last"], session["report.md"].read_text()):
        assert "hints used: 1 of 4" in text and "timeline: 2 runs" in text and "top_left_alignment at" in text
        assert "60 min time box" in text and "candidate's machine" in text
    junit = run("report", session["result.json"], "--junit", "-")
    gradescope = json.loads(run("report", session["result.json"], "--gradescope", "-"))["output"]
    for text in (junit, gradescope):
        assert "hints used: 1 of 4" in text and "timeline: 2 runs" in text
    page = session["report.html"].read_text()
    assert 'class="timeline"' in page and page.count("<circle") == 2 and "fixed at" in page
    assert "hints used: 1 of 4" in page and "Interviewer's sheet" in page


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_the_candidates_summary_report_holds_no_sheet_and_no_hint_offer_once_every_check_passes(session):
    page = run("report", session["result.json"], "--feedback", "summary", "--html", "-")
    assert "kvgrade hint decode_mask" not in page and "Interviewer's sheet" not in page  # the last run is right
    for h in catalog.get("decode_mask").rubric.hints:
        assert " ".join(h.text.split()) not in " ".join(page.split())


@pytest.mark.slow  # whole gradings: the full suite runs it, the fast loop stays under a minute
def test_a_folder_not_made_by_start_logs_nothing(tmp_path):
    shutil.copyfile(KIT / "solutions" / "decode_mask.py", tmp_path / "decode_mask.py")
    data = json.loads(run("grade", "--seed", "0", tmp_path, "-e", "decode_mask", "--json", "-"))
    assert data["session"] == {} and data["exercises"][0]["timeline"] == {}
    assert not (tmp_path / ".kvgrade").exists()


@pytest.mark.browser
def test_a_real_browser_draws_the_session_timeline(session, tmp_path):
    """Chromium lays the chart out: a visible SVG with the line and one dot per run, the wrong
    run red and the right one green; and a screenshot to look at."""
    from . import browser

    page = session["report.html"].read_text()
    drawn = browser.measure(page, """(() => { const svg = document.querySelector('svg.timeline');
        const box = svg.getBoundingClientRect();
        return {width: box.width, height: box.height, line: svg.querySelectorAll('polyline').length,
                dots: [...svg.querySelectorAll('circle')].map(c => getComputedStyle(c).fill)}; })()""",
                            tmp_path, width=1200)
    assert drawn["width"] > 100 and drawn["height"] > 50 and drawn["line"] == 1
    assert drawn["dots"] == ["rgb(217, 65, 43)", "rgb(46, 125, 50)"]  # #d9412b then #2e7d32
    path, png = tmp_path / "report.html", tmp_path / "report.png"
    path.write_text(page)
    assert browser.screenshot(path, png, tmp_path, 1200, 3000) == (1200, 3000)


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_a_hint_the_interviewer_records_later_lowers_the_saved_level(session, tmp_path):
    template = run("notes", session["result.json"])
    assert "# hints = [2]" in template and "kvgrade show decode_mask --interviewer" in template
    notes = tmp_path / "notes.toml"
    notes.write_text(template.replace("# hints = [2]", "hints = [2]"))
    data = json.loads(run("report", session["result.json"], "--notes", notes, "--json", "-"))
    e = data["exercises"][0]
    assert e["level"] == catalog.get("decode_mask").rubric.hints[1].caps == "hire"
    assert e["hints_given"] == [2] and "hint 2 given" in e["reason"]
    assert e["timeline"]["runs"] == 2  # the saved timeline survives re-rendering
    noted = tmp_path / "noted.json"
    run("report", session["result.json"], "--notes", notes, "--json", noted)
    assert "hints = [2]" in run("notes", noted)  # the template of a noted result keeps them


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_summary_feedback_in_every_format_says_hints_used_without_texts_levels_or_the_sheet(session):
    hints = [" ".join(h.text.split()) for h in catalog.get("decode_mask").rubric.hints]
    outs = {"terminal": run("report", session["result.json"], "--feedback", "summary")}
    for fmt in ("html", "markdown", "junit", "gradescope"):
        outs[fmt] = run("report", session["result.json"], "--feedback", "summary", f"--{fmt}", "-")
    for fmt, text in outs.items():
        flat = " ".join(text.split())
        assert "hints used: 1 of 4" in flat, fmt
        assert "Interviewer's sheet" not in flat and "caps the level at" not in flat, fmt
        assert not any(h in flat for h in hints), fmt
        assert "strong hire" not in flat, fmt  # levels hidden unless --show-levels
    for fmt in ("terminal", "html", "markdown", "gradescope"):  # every check passes: no hint is offered
        assert "kvgrade hint decode_mask" not in outs[fmt], fmt


@pytest.mark.slow  # grades whole submissions end to end: the full suite runs it
def test_attempt_log_strings_in_a_saved_result_are_neutralised(session, tmp_path):
    evil = "\x1b[2K\r\x1b[32mfixed\x1b[0m \u202eevil\u202c zero\u200bwidth \x85c1"
    data = json.loads(session["result.json"].read_text())
    data["session"]["kept_by"] = evil
    data["session"]["started"] = evil
    data["exercises"][0]["timeline"]["diagnoses"][0].update(at=evil, fixed=evil)
    saved = tmp_path / "edited.json"
    saved.write_text(json.dumps(data))
    outs = [run("report", saved)] + [run("report", saved, f"--{fmt}", "-")
                                     for fmt in ("html", "markdown", "junit", "gradescope")]
    for text in outs:
        for raw in ("\x1b", "\r", "\u202e", "\u202c", "\u200b", "\x85"):
            assert raw not in text, repr(raw)
    assert "\\u202eevil" in outs[0]


@pytest.mark.slow  # grades two workspaces
def test_the_batch_alias_logs_no_attempt(tmp_path):
    spaces = [tmp_path / name for name in ("a", "b")]
    for ws in spaces:
        run("start", ws, "-e", "decode_mask")
        shutil.copyfile(KIT / "solutions" / "decode_mask.py", ws / "decode_mask" / "decode_mask.py")
    run("grade", "--seed", "0", *spaces, "-e", "decode_mask", "--out", tmp_path / "out", "--jobs", "1")
    for ws in spaces:
        assert timeline.attempts(ws) == []


def test_the_candidates_copy_offers_a_hint_only_while_a_check_fails_and_never_mentions_levels():
    def exercise(passed):
        return SimpleNamespace(id="decode_mask", hints_offered=4, status="graded", timeline={"hints_seen": 0},
                               hints_given=[2], checks=[SimpleNamespace(passed=passed)])

    failing, done = (hint_lines(exercise(passed), candidate=True, workspace="ws") for passed in (False, True))
    assert any(line.startswith("stuck? 4 staged hints") for line in failing)
    assert not any(line.startswith("stuck?") for line in done)
    assert not any("level" in line for line in failing + done)
    assert "they count toward the level" in hint_lines(exercise(True))[0]  # the interviewer's copy says so


def test_no_log_and_no_recorded_hint_is_said_as_such_never_as_zero_used():
    batch = SimpleNamespace(id="decode_mask", hints_offered=4, status="graded", timeline={}, hints_given=[],
                            checks=[])
    workspace = SimpleNamespace(**{**vars(batch), "timeline": {"hints_seen": 0}})
    assert hint_lines(batch) == ["hints used: none recorded (4 staged; no workspace log, no hint in the notes)"]
    assert hint_lines(workspace) == ["hints used: 0 of 4"]


def test_a_timeline_of_one_run_says_it_once_and_every_check_is_the_bar():
    one = SimpleNamespace(timeline={"points": [[0.4, 14, 22]], "first_correct_minutes": None})
    two = SimpleNamespace(timeline={"points": [[0.4, 14, 22], [3.0, 22, 22]], "first_correct_minutes": 3.0})
    assert "(14/22 at 0.4 min); no run passed every check" in timeline_lines(one)[0]
    assert "(14/22 at 0.4 min -> 22/22 at 3 min); first run passing every check after 3 min" in timeline_lines(two)[0]
