"""The live room's rules through its real HTTP app (Starlette's test client): tokens, errors,
sizes, one run at a time, nothing lost on a restart, and the extra's absence.

Runs here never reach the grader (the job is held or answered by a stand-in), so these are
fast; grading itself is covered by test_room_leaks.py and the browser test.
"""
import json
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from grader import cli, engine
from grader.room import grading, session
from grader.room.session import Room, RoomError

EXERCISE = "decode_mask"


@pytest.fixture
def held(monkeypatch):
    """Jobs wait until ``held.set()``; each then answers as a public run with no tests."""
    gate = threading.Event()

    def job(name, *args, timeout):
        assert gate.wait(30), "the test never released the job"
        return {"exit": 5, "tests": {}, "output": "no tests ran"}
    monkeypatch.setattr(grading, "run_job", job)
    yield gate
    gate.set()


@pytest.fixture
def room(tmp_path, held):
    r = Room(tmp_path / "session", [EXERCISE], None, None)
    yield r
    r.close()


def app_module():
    pytest.importorskip("starlette", reason="the room extra (kvgrade[room]) is not installed")
    from grader.room import app

    return app


def clients(room):
    from starlette.testclient import TestClient

    client = TestClient(app_module().create_app(room), raise_server_exceptions=False)
    c, i = room.meta["candidate_token"], room.meta["interviewer_token"]
    return client, {"X-Kvgrade-Token": c}, {"X-Kvgrade-Token": i}


def test_each_token_opens_its_own_side_only(room):
    client, cand, inter = clients(room)
    c, i = cand["X-Kvgrade-Token"], inter["X-Kvgrade-Token"]
    assert client.get(f"/c/{c}/").status_code == 200 and client.get(f"/i/{i}/").status_code == 200
    assert client.get(f"/i/{c}/").status_code == 404  # the candidate's token is no interviewer link
    assert client.get(f"/c/{i}/").status_code == 404
    for method, path in [("GET", "state"), ("GET", "events"), ("GET", "reports/result.json"), ("POST", "end"),
                         ("POST", "hints"), ("PUT", "observed"), ("PUT", "notes")]:
        answer = client.request(method, f"/api/interviewer/{path}", headers=cand, json={})
        assert answer.status_code == 403, (method, path, answer.text)
    assert client.get("/api/candidate/state", headers=inter).status_code == 403
    assert client.get("/api/candidate/state", headers={"X-Kvgrade-Token": c + "x"}).status_code == 403
    assert len(c) >= 32 and c != i


def test_changes_need_the_token_in_a_header_not_only_the_url(room):
    client, cand, _ = clients(room)
    token = cand["X-Kvgrade-Token"]
    body = {"exercise": EXERCISE, "name": "decode_mask.py", "text": "x = 1\n"}
    refused = client.put(f"/api/candidate/files?token={token}", json=body)
    assert refused.status_code == 401 and "X-Kvgrade-Token" in refused.json()["error"]
    assert client.get(f"/api/candidate/state?token={token}").status_code == 200  # a read may use the URL
    assert client.put("/api/candidate/files", json=body, headers=cand).status_code == 200
    assert room.store.files()[(EXERCISE, "decode_mask.py")] == "x = 1\n"


@pytest.mark.parametrize("body, status, words", [
    (b"{not json", 400, "must be JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"exercise": "nope", "name": "decode_mask.py", "text": ""}', 404, "no exercise 'nope'"),
    (b'{"exercise": "decode_mask", "name": "../../etc/passwd", "text": ""}', 404, "no file"),
    (b'{"exercise": "decode_mask", "name": "decode_mask.py", "text": 7}', 400, "must be a string"),
    (b'{"exercise": "decode_mask", "name": "decode_mask.py", "text": "\\ud800"}', 400, "no lone surrogates"),
    (b'{"exercise": ["decode_mask"], "name": "decode_mask.py", "text": ""}', 404, "no exercise"),
    (b'{"exercise": "decode_mask", "name": {"a": 1}, "text": ""}', 404, "no file"),
])
def test_a_bad_request_gets_a_clear_error_and_no_traceback(room, body, status, words):
    client, cand, _ = clients(room)
    answer = client.put("/api/candidate/files", content=body, headers=cand)
    assert answer.status_code == status and words in answer.json()["error"]
    assert "Traceback" not in answer.text


def test_two_tabs_do_not_fight_the_last_write_wins(room):
    client, cand, inter = clients(room)
    for text in ("# tab one\n", "# tab two\n"):
        client.put("/api/candidate/files", headers=cand, json={"exercise": EXERCISE, "name": "decode_mask.py",
                                                               "text": text})
    for side, header in (("candidate", cand), ("interviewer", inter)):
        files = client.get(f"/api/{side}/state", headers=header).json()["exercises"][0]["files"]
        assert files[0]["text"] == "# tab two\n"  # what a reload of either page shows
    assert room.store.snapshot_count() == 4  # both stubs, then each tab's edit: history keeps all


def test_a_set_of_two_exercises_each_with_its_own_files_and_the_summed_time_box(tmp_path, held):
    room = Room(tmp_path / "s", [EXERCISE, "tree_mask"])
    try:
        client, cand, _ = clients(room)
        state = client.get("/api/candidate/state", headers=cand).json()
        assert [(e["id"], [f["name"] for f in e["files"]]) for e in state["exercises"]] == [
            (EXERCISE, ["decode_mask.py", "test_decode_mask.py"]), ("tree_mask", ["tree_mask.py"])]
        assert state["minutes"] == sum(room.exercises[e].rubric.time_box_minutes for e in room.exercises)
        assert state["exercises"][1]["files"][0]["text"] == room.exercises["tree_mask"].stub_path.read_text()
        answer = client.put("/api/candidate/files", headers=cand,
                            json={"exercise": "tree_mask", "name": "test_tree_mask.py", "text": ""})
        assert answer.status_code == 404  # tree_mask asks for no tests of the candidate's own
    finally:
        room.close()


def test_the_edit_history_skips_unchanged_saves_and_stops_growing_at_its_cap(room, monkeypatch):
    from grader.room import store

    monkeypatch.setattr(store, "MAX_SNAPSHOTS", 3)
    for text in ("a\n", "a\n", "b\n", "c\n", "d\n"):
        room.save(EXERCISE, "decode_mask.py", text)
    history = [t for _, _, e, n, t in room.store._rows("SELECT * FROM snapshots ORDER BY id") if n == "decode_mask.py"]
    assert history == [room.exercises[EXERCISE].stub_path.read_text(), "a\n", "d\n"]
    assert room.store.files()[(EXERCISE, "decode_mask.py")] == "d\n"


def test_sizes_are_capped(room):
    client, cand, _ = clients(room)
    big = "#" * (session.MAX_FILE_BYTES + 1)
    answer = client.put("/api/candidate/files", headers=cand,
                        json={"exercise": EXERCISE, "name": "decode_mask.py", "text": big})
    assert answer.status_code == 413 and "KiB" in answer.json()["error"]
    flood = client.put("/api/candidate/files", headers=cand, content=b"x" * (app_module().MAX_BODY_BYTES + 10))
    assert flood.status_code == 413
    assert client.get("/nowhere").json() == {"error": "no such page or API route"}


def test_one_run_at_a_time_and_a_second_is_refused_with_a_message(room, held):
    client, cand, _ = clients(room)
    first = client.post("/api/candidate/runs", headers=cand, json={"exercise": EXERCISE, "kind": "public"})
    assert first.status_code == 200
    second = client.post("/api/candidate/runs", headers=cand, json={"exercise": EXERCISE, "kind": "submit"})
    assert second.status_code == 429 and "already going" in second.json()["error"]
    assert [r["status"] for r in room.store.runs()] == ["running"]
    held.set()
    for _ in range(200):  # the held job now finishes; bounded wait on the worker thread
        if room.store.runs()[0]["status"] == "done":
            break
        threading.Event().wait(0.05)
    assert room.store.runs()[0]["status"] == "done"
    again = client.post("/api/candidate/runs", headers=cand, json={"exercise": EXERCISE, "kind": "public"})
    assert again.status_code == 200


@pytest.mark.parametrize("files", [{"decode_mask.py": "\ud800"}, {"decode_mask.py": 7}, {"nope.py": ""}])
def test_a_refused_run_holds_no_slot(room, held, files):
    """Red team 8: a run whose file the store could not keep (a lone surrogate) took the one run slot
    and never gave it back: every later run got 429 until a restart."""
    client, cand, _ = clients(room)
    body = json.dumps({"exercise": EXERCISE, "kind": "public", "files": files})  # a surrogate as JSON's \\ud800
    refused = client.post("/api/candidate/runs", headers=cand, content=body.encode())
    assert 400 <= refused.status_code < 500 and "Traceback" not in refused.text
    assert room.store.runs() == []
    later = client.post("/api/candidate/runs", headers=cand, json={"exercise": EXERCISE, "kind": "public"})
    assert later.status_code == 200, later.text


def test_a_store_failure_after_queueing_frees_the_slot(room, held, monkeypatch):
    """Whatever fails between taking the slot and queueing the job (a full disk) gives the slot back."""
    def full_disk(*args):
        raise OSError("No space left on device")
    monkeypatch.setattr(room.store, "start_run", full_disk)
    with pytest.raises(OSError):
        room.run(EXERCISE, "public")
    monkeypatch.undo()
    held.set()
    assert room.run(EXERCISE, "public") >= 1


def test_hints_reach_the_candidate_only_once_sent(room):
    client, cand, inter = clients(room)
    hints = room.exercises[EXERCISE].rubric.hints
    seen = client.get("/api/candidate/state", headers=cand).text
    assert not any(" ".join(h.text.split()) in seen for h in hints)
    sent = client.post("/api/interviewer/hints", headers=inter, json={"exercise": EXERCISE, "number": 2})
    assert sent.status_code == 200
    state = client.get("/api/candidate/state", headers=cand).json()
    assert [h["number"] for h in state["exercises"][0]["hints"]] == [2]
    assert state["exercises"][0]["hints"][0]["text"] == " ".join(hints[1].text.split())
    bad = client.post("/api/interviewer/hints", headers=inter, json={"exercise": EXERCISE, "number": 99})
    assert bad.status_code == 400 and "hints 1 to" in bad.json()["error"]


def test_a_restart_on_the_same_folder_keeps_links_code_and_the_record(tmp_path, held):
    first = Room(tmp_path / "s", [EXERCISE], 45, "detail")
    first.save(EXERCISE, "decode_mask.py", "# typed before the restart\n")
    first.send_hint(EXERCISE, 1)
    criterion = next(c.id for c in first.exercises[EXERCISE].rubric.criteria if c.observed)
    first.observe(EXERCISE, criterion, True)
    first.note(EXERCISE, "found the offset <b>fast</b>")
    tokens = (first.meta["candidate_token"], first.meta["interviewer_token"])
    first.close()

    second = Room(tmp_path / "s")  # resumed without options
    assert (second.meta["candidate_token"], second.meta["interviewer_token"]) == tokens
    assert (second.meta["minutes"], second.meta["feedback"]) == (45, "detail")
    view = second.interviewer_view()["exercises"][0]
    assert view["files"][0]["text"] == "# typed before the restart\n"
    assert (view["hints_sent"], view["observed"], view["notes"]) == ([1], {criterion: True},
                                                                      "found the offset <b>fast</b>")
    second.close()
    with pytest.raises(RoomError, match="already started with exercises"):
        Room(tmp_path / "s", ["tree_mask"])


def test_a_run_cut_short_by_a_crash_is_kept_as_interrupted(tmp_path, held):
    first = Room(tmp_path / "s", [EXERCISE])
    first.run(EXERCISE, "submit", {"decode_mask.py": "# submitted just before the crash\n"})
    first.store.close()  # the server dies with the run going (its job thread stays held)
    second = Room(tmp_path / "s")
    runs = second.store.runs()
    assert [(r["kind"], r["status"]) for r in runs] == [("submit", "interrupted")]
    assert 0 <= runs[0]["seed"] < engine.SEED_BOUND  # the CLI's fresh seeds, short in a rerun line
    assert "stopped during this run" in second.candidate_view()["exercises"][0]["runs"][0]["error"]
    assert second.store.files()[(EXERCISE, "decode_mask.py")] == "# submitted just before the crash\n"
    second.close()


def test_the_end_freezes_the_candidate(room, held):
    client, cand, inter = clients(room)
    assert client.post("/api/interviewer/end", headers=inter).status_code == 200
    answer = client.put("/api/candidate/files", headers=cand,
                        json={"exercise": EXERCISE, "name": "decode_mask.py", "text": "late\n"})
    assert answer.status_code == 409 and "ended" in answer.json()["error"]
    assert client.get("/api/candidate/state", headers=cand).json()["ended"] is True


def test_serve_without_the_extra_says_how_to_install_it(monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path / "s"), "-e", EXERCISE])
    assert result.exit_code == 2
    assert "pip install 'kvgrade[room]'" in result.output and len(result.output.strip().splitlines()) == 1


def test_a_folder_that_is_not_a_session_is_refused_in_one_line(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "room.sqlite").write_text("not a database")
    result = CliRunner().invoke(cli.main, ["serve", str(tmp_path / "s")])
    assert result.exit_code == 2 and "cannot open the session" in result.output
    assert "Traceback" not in result.output


def test_the_core_never_imports_the_room_extra():
    code = "import sys, grader.cli, grader.engine; print(sorted({'starlette', 'uvicorn'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_session_store_is_the_owners_alone_in_any_folder(tmp_path, held):
    """Red team 13: in a folder made beforehand (mode 755), room.sqlite, which holds both tokens, was made
    readable by every user, a child at the uid level included."""
    folder = tmp_path / "made-by-hand"
    folder.mkdir(mode=0o755)
    r = Room(folder, [EXERCISE], None, None)
    try:
        r.store.set_meta(note="written")  # the write-ahead log exists now too
        made = [p for p in folder.iterdir() if p.name.startswith("room.sqlite")]
        assert {p.name for p in made} >= {"room.sqlite", "room.sqlite-wal"}
        assert all(p.stat().st_mode & 0o077 == 0 for p in made), {p.name: oct(p.stat().st_mode) for p in made}
    finally:
        r.close()
