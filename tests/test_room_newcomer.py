"""The live room as newcomer 17 met it (FINDINGS items 1, 9 and 12), through a real `kvgrade serve` process and
real HTTP: the own-test tab opens as a stub with no tests, the public tests are there to read and are not the
candidate's to edit, the candidate can run their own tests, an untouched tab earns no own-test criterion, a
refused `serve` writes nothing, a resumed ended session says when it ended, and SIGTERM ends `serve` as it ends
every command (`Aborted!`, 130)."""
import json
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from grader import catalog

from .room_server import REPO, Server, environment, kvgrade

pytestmark = pytest.mark.slow

WAIT_SECONDS = 300  # a grading on a loaded machine; every wait is bounded by it
RIGHT_MASK = (REPO / "solutions" / "decode_mask.py").read_text()
OWN_TESTS = '''from decode_mask import decode_causal_mask


def test_mine_fails():
    assert False, "written to fail"


def test_decode_sees_everything():
    assert decode_causal_mask(1, 3).all()
'''


def call(server: Server, side: str, method: str, path: str, body=None):
    """One API request as the pages make it; an error answer comes back as ``(status, body)``."""
    request = urllib.request.Request(f"{server.base}/api/{side}/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-Kvgrade-Token": server.token(side),
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def until(test, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while not (found := test()):
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_SECONDS} s"
        time.sleep(0.3)
    return found


def section(state: dict, exercise: str) -> dict:
    return next(e for e in state["exercises"] if e["id"] == exercise)


def start(server: Server, exercise: str, kind: str, files: dict) -> int:
    answer = call(server, "candidate", "POST", "runs", {"exercise": exercise, "kind": kind, "files": files})
    assert isinstance(answer, dict) and "run" in answer, answer
    return answer["run"]


def finished_run(server: Server, side: str, exercise: str, kind: str) -> dict:
    def done():
        runs = section(call(server, side, "GET", "state"), exercise)["runs"]
        return next((r for r in runs if r["kind"] == kind and r["status"] != "running"), None)
    return until(done, f"the {kind} run of {exercise}")


def test_the_own_test_tab_opens_empty_and_the_public_tests_are_there_to_read(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "decode_mask,tile_classification", "--port", "0")
    try:
        state = call(server, "candidate", "GET", "state")
        mask, tiles = section(state, "decode_mask"), section(state, "tile_classification")
        assert [f["name"] for f in mask["files"]] == ["decode_mask.py", "test_decode_mask.py"]
        own = mask["files"][1]["text"]
        assert own.strip() and all(line.startswith("#") for line in own.splitlines() if line.strip()), own
        assert "def test" not in own and "Public tests" not in own  # a stub: no test, none of the kit's
        assert mask["own_tests"] == "test_decode_mask.py" and tiles["own_tests"] is None
        for exercise, shown in ((mask, "decode_mask"), (tiles, "tile_classification")):
            kit = catalog.get(shown).public_tests[0]
            assert kit.name in exercise["prompt"]  # the prompt sends the candidate to it...
            assert exercise["public_files"] == [{"name": kit.name, "text": kit.read_text()}]  # ...and here it is
        refused = call(server, "candidate", "PUT", "files", {"exercise": "decode_mask",
                                                              "name": "test_decode_mask_public.py", "text": ""})
        assert refused[0] == 404  # to read, not to edit
        refused = call(server, "candidate", "POST", "runs", {"exercise": "tile_classification", "kind": "own"})
        assert refused[0] == 400 and "no tests of your own" in refused[1]["error"]
    finally:
        server.stop()


def test_the_candidate_runs_their_own_tests_and_the_public_run_is_the_kits(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "decode_mask", "--port", "0")
    files = {"decode_mask.py": RIGHT_MASK, "test_decode_mask.py": OWN_TESTS}
    try:
        start(server, "decode_mask", "own", files)
        own = finished_run(server, "candidate", "decode_mask", "own")
        assert own["status"] == "done" and own["exit"] == 1, own
        assert own["tests"] == {"test_mine_fails": "failed", "test_decode_sees_everything": "passed"}, own
        assert "written to fail" in own["output"]
        start(server, "decode_mask", "public", files)
        public = finished_run(server, "candidate", "decode_mask", "public")
        kit = (REPO / "exercises" / "decode_mask" / "test_decode_mask_public.py").read_text()
        assert public["exit"] == 0 and public["tests"] and set(public["tests"].values()) == {"passed"}, public
        assert all(f"def {name}(" in kit for name in public["tests"])  # the kit's tests, not the candidate's
        seen = section(call(server, "interviewer", "GET", "state"), "decode_mask")["runs"]
        assert {r["kind"] for r in seen} == {"own", "public"}  # the interviewer watches both
    finally:
        server.stop()


def test_an_untouched_own_test_tab_earns_no_own_test_criterion(tmp_path):
    """Newcomer 17: the tab held the public tests, and a right module submitted with it untouched met
    own_tests_pass_on_reference, own_tests_catch_top_left and own_tests_mutation_score."""
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "decode_mask", "--port", "0")
    try:
        start(server, "decode_mask", "submit", {"decode_mask.py": RIGHT_MASK})
        graded = finished_run(server, "interviewer", "decode_mask", "submit")
        assert graded["status"] == "done", graded
        checks = {c["id"]: c["passed"] for c in graded["exercises"][0]["checks"]}
        own = {check: passed for check, passed in checks.items() if check.startswith("own_tests")}
        assert own and not any(own.values()), own
        assert all(passed for check, passed in checks.items() if not check.startswith("own_tests")), checks
    finally:
        server.stop()


def test_a_refused_serve_writes_nothing(tmp_path):
    """`serve` on a new session without -e (and one whose port is taken) exits 2 and leaves no session:
    not the folder, not room.sqlite (README: "2 for bad input ... and nothing written")."""
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")

    def serve(*args):
        return subprocess.run(kvgrade(["serve", *args]), env=environment(), capture_output=True, text=True,
                              timeout=120)
    missing = tmp_path / "new" / "session"
    refused = serve(str(missing))
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.startswith("Error: ") and "-e ID" in refused.stderr, refused.stderr
    assert not (tmp_path / "new").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert serve(str(empty)).returncode == 2
    assert list(empty.iterdir()) == []  # the folder was there already: it stays, and stays empty
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = serve(str(missing), "-e", "tree_mask", "--port", str(taken.getsockname()[1]))
    assert busy.returncode == 2 and "cannot listen" in busy.stderr, busy
    assert not (tmp_path / "new").exists()


def _ended_at(folder: Path) -> str:
    with sqlite3.connect(folder / "room.sqlite") as db:
        return json.loads(db.execute("SELECT value FROM meta WHERE key = 'ended'").fetchone()[0])


def test_resuming_an_ended_session_says_when_it_ended(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    folder = tmp_path / "s"
    server = Server(str(folder), "-e", "tree_mask", "--port", "0")
    try:
        assert "(new session;" in server.output[0]
        call(server, "interviewer", "POST", "end", {})
        until(lambda: "result.json" in call(server, "interviewer", "GET", "state")["reports"], "the reports")
    finally:
        server.stop()
    ended = datetime.fromisoformat(_ended_at(folder)).strftime("%Y-%m-%d %H:%M:%S UTC")
    again = Server(str(folder), "--port", "0")
    try:
        assert f"(resumed session, which ended {ended}: both pages are read-only;" in again.output[0], again.output
    finally:
        again.stop()
    fresh = Server(str(tmp_path / "t"), "-e", "tree_mask", "--port", "0")
    fresh.stop()
    live = Server(str(tmp_path / "t"), "--port", "0")
    try:
        assert "(resumed session; time box" in live.output[0] and "which ended" not in live.output[0], live.output
    finally:
        live.stop()


def test_sigterm_ends_serve_as_every_command_aborted_and_130(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "tree_mask", "--port", "0")
    try:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 130
    finally:
        server.stop()
    rest = []
    while (line := server.lines.get(timeout=10)) is not None:
        rest.append(line)
    assert rest[-1] == "Aborted!", rest
    assert any(line.startswith("stopped; everything is kept in") for line in rest), rest
    assert not [line for line in rest if "Traceback" in line or "ERROR" in line], rest
    assert (tmp_path / "s" / "room.sqlite").is_file()  # the session stays, to resume
