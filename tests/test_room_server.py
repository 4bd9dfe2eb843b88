"""`kvgrade serve` as a process: where it listens, and a Ctrl-C with a page still connected."""
import signal
import threading
import urllib.request

import pytest

from .room_server import Server


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
        assert server.proc.wait(timeout=30) == 0
    finally:
        server.stop()
    rest = []
    while (line := server.lines.get(timeout=10)) is not None:
        rest.append(line)
    assert not [line for line in rest if "Traceback" in line or "ERROR" in line], rest
