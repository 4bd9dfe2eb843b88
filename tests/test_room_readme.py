"""The README's room walkthrough, run as written: `kvgrade serve`, an interview over HTTP as the
two pages do it (a wrong answer, hint 2, an observation, the end), then `kvgrade report` on the
files the end wrote, and the serve command again: the same links."""
import json
import re
import shlex
import subprocess
import time
import urllib.request

import pytest

from .room_server import REPO, Server, environment, kvgrade

pytestmark = pytest.mark.slow

WRONG = "import numpy as np\n\n\ndef decode_causal_mask(T, S):\n    return np.tril(np.ones((T, S), bool))\n"
WAIT_SECONDS = 300


def readme_commands() -> list[str]:
    """The `kvgrade` lines of the first bash block in the README's interview section."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Interview mode", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.startswith("kvgrade ")]


def call(server: Server, side: str, method: str, path: str, body=None):
    request = urllib.request.Request(f"{server.base}/api/{side}/{path}", method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"X-Kvgrade-Token": server.token(side),
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def until(test, what: str):
    deadline = time.monotonic() + WAIT_SECONDS
    while not test():
        assert time.monotonic() < deadline, f"{what}: not within {WAIT_SECONDS} s"
        time.sleep(0.2)


def test_the_readme_room_walkthrough_runs_as_written(tmp_path):
    pytest.importorskip("uvicorn", reason="the room extra (kvgrade[room]) is not installed")
    serve, report = readme_commands()
    assert serve.startswith("kvgrade serve ") and report.startswith("kvgrade report ")
    args = shlex.split(serve)[2:]
    server = Server(*args, cwd=tmp_path)
    try:
        assert [line.split()[0] for line in server.output[1:3]] == ["candidate:", "interviewer:"]
        assert "never opens a tunnel" in "\n".join(server.output + [server.lines.get(timeout=10)])
        call(server, "candidate", "POST", "runs", {"exercise": "decode_mask", "kind": "submit",
                                                   "files": {"decode_mask.py": WRONG}})
        def last_run():
            return call(server, "interviewer", "GET", "state")["exercises"][0]["runs"][-1]
        until(lambda: last_run()["status"] != "running", "the submission graded")
        assert last_run()["status"] == "done", last_run()
        call(server, "interviewer", "POST", "hints", {"exercise": "decode_mask", "number": 2})
        call(server, "interviewer", "POST", "end", {})
        folder = tmp_path / args[0]
        until(lambda: all((folder / name).is_file() for name in ("result.json", "report.html", "notes.toml")),
              "the reports")
    finally:
        server.stop()

    done = subprocess.run(kvgrade(shlex.split(report)[1:]), cwd=tmp_path, env=environment(), capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "report.html").read_text()
    assert "Kept by the kvgrade serve server" in html and "top_left_alignment" in html
    assert "hint 2" in html

    again = Server(*args, cwd=tmp_path)
    try:
        assert again.links == server.links
    finally:
        again.stop()
