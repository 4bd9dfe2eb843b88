"""`kvgrade serve` as a process: where it listens, and a Ctrl-C with a page still connected."""
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from .room_server import Server, environment, kvgrade


def test_ctrl_c_stops_the_server_cleanly_while_a_page_listens(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    server = Server(str(tmp_path / "s"), "-e", "tree_mask", "--port", "0")
    try:
        assert server.base.startswith("http://127.0.0.1:")  # loopback unless --host says otherwise
        listening = threading.Event()

        def listen():  # an open page: its event stream stays open until the server ends it
            url = f"{server.base}/api/candidate/events?token={server.token('candidate')}"
            with urllib.request.urlopen(url, timeout=60) as stream:
                stream.readline()
                listening.set()
                stream.read()
        threading.Thread(target=listen, daemon=True).start()
        assert listening.wait(30), "the event stream never opened"
        server.proc.send_signal(signal.SIGINT)
        assert server.proc.wait(timeout=30) == 130  # as every command ends on Ctrl-C (README), after a clean stop
    finally:
        server.stop()
    rest = []
    while (line := server.lines.get(timeout=10)) is not None:
        rest.append(line)
    assert not [line for line in rest if "Traceback" in line or "ERROR" in line], rest


def test_without_isolation_the_room_refuses_unless_the_code_is_trusted(tmp_path):
    """Red team 13: where no sandbox works (the process level), the room graded the candidate's code in the
    interviewer's own account, where a mutant read the server's tokens and marked every criterion met. Now it
    refuses as batch does: one line, exit 2, no session folder; --trust-submissions serves, and says so."""
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    unisolated = {"KVGRADE_ISOLATION": "process"}
    refused = subprocess.run(kvgrade(["serve", str(tmp_path / "s"), "-e", "tree_mask", "--port", "0"]),
                             env={**environment(), **unisolated}, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stdout == "", refused
    assert refused.stderr.count("\n") == 1 and "refusing to run other people's code" in refused.stderr
    assert not (tmp_path / "s").exists()
    server = Server(str(tmp_path / "t"), "-e", "tree_mask", "--port", "0", "--trust-submissions", env=unisolated)
    try:
        assert "isolation process: NOT ISOLATED" in server.output[0], server.output
    finally:
        server.stop()


def test_one_side_cannot_hold_the_servers_connections(tmp_path):
    """Red team 13: the candidate's token opened event streams without end until the server ran out of files
    and the interviewer's page timed out. A side now holds MAX_STREAMS at most: each newer one ends its oldest."""
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    from grader.room.session import MAX_STREAMS
    server = Server(str(tmp_path / "s"), "-e", "tree_mask", "--port", "0")
    streams = []
    try:
        for _ in range(MAX_STREAMS + 4):
            streams.append(urllib.request.urlopen(
                f"{server.base}/api/candidate/events?token={server.token('candidate')}", timeout=30))
            assert streams[-1].readline().startswith(b"retry:")
        for ended in streams[:4]:  # ended by newer ones: the rest of each arrives, then the end
            assert _ends(ended, within=20.0)
        with urllib.request.urlopen(f"{server.base}/api/interviewer/events?token={server.token('interviewer')}",
                                    timeout=30) as mine:
            assert mine.readline().startswith(b"retry:")
    finally:
        for stream in streams:
            stream.close()
        server.stop()


def _ends(stream, within: float) -> bool:
    """Whether ``stream`` reaches its end within ``within`` seconds (a live one sends a keep-alive comment
    every 15 s, so a plain read would never return)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if stream.read1(1 << 16) == b"":
            return True
    return False
