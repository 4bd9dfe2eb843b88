"""`kvgrade serve` as a real child process for the room's tests, and Selenium's Chromium.

The server runs in a session of its own, so a test can kill it (and any grading process it
started) by its id, as a crash or a Ctrl-C would; every wait has a deadline.
"""
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from . import browser

REPO = Path(__file__).resolve().parent.parent
START_SECONDS = 60.0

# A tree_mask answer with the classic mistake (triangle_tree_mask): its grading is quick
# (no own-tests stage), so the room's tests interview this exercise.
COMMON = """import numpy as np


def _check(parents, P):
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 0:
        raise ValueError(f"P must be an int >= 0, got {P!r}")
    parents = [int(p) for p in parents]
    for i, p in enumerate(parents):
        if not -1 <= p < i:
            raise ValueError(f"parents[{i}] = {p} is not -1 or an earlier draft")
    return parents


def tree_positions(parents, P):
    depth = []
    for p in _check(parents, P):
        depth.append(0 if p < 0 else depth[p] + 1)
    return P + np.array(depth, dtype=np.int64)

"""
TRIANGLE = "    return np.tril(np.ones((T, P + T), bool), k=P)\n"
WRONG = COMMON + "\ndef tree_attention_mask(parents, P):\n    T = len(_check(parents, P))\n" + TRIANGLE


def kvgrade(args: list[str]) -> list[str]:
    """A ``kvgrade`` command line as this checkout runs it, from any folder."""
    return [sys.executable, "-m", "grader", *args]


def environment() -> dict:
    """This checkout importable from any working folder (``python -m grader`` drops the cwd)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


class Server:
    def __init__(self, *args: str, cwd: Path = REPO, env: dict | None = None):
        self.proc = subprocess.Popen(kvgrade(["serve", *args]), cwd=cwd, env={**environment(), **(env or {})},
                                     text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.output: list[str] = []
        self.links = self._links()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _links(self) -> dict:
        links = {}
        while len(links) < 2:
            try:
                line = self.lines.get(timeout=START_SECONDS)
            except queue.Empty:
                self.stop()
                pytest.fail(f"kvgrade serve printed no links within {START_SECONDS:g} s: {self.output}")
            if line is None:
                pytest.fail(f"kvgrade serve exited: {self.output}")
            self.output.append(line)
            label, _, link = line.partition(":")
            if label in ("candidate", "interviewer") and link.strip().startswith("http"):
                links[label] = link.strip()
        return links

    @property
    def base(self) -> str:
        return self.links["candidate"].split("/c/")[0]

    def token(self, side: str) -> str:
        return self.links[side].rstrip("/").rsplit("/", 1)[1]

    def stop(self, sig=signal.SIGKILL):
        """Kill the server's process group (the server and its grading processes) and wait."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)


def chrome(profile: Path, width: int = 1280, height: int = 900):
    """A headless Chromium driven by Debian's chromedriver; skipped (failed in CI) when missing."""
    binary = browser.chromium()
    driver_path = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists()
                                                  else None)
    try:
        from selenium import webdriver
    except ImportError:
        driver_path = None
    if driver_path is None:
        why = "selenium or chromedriver (Debian's chromium-driver) is not installed"
        if os.environ.get("KVGRADE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"KVGRADE_REQUIRE_CHROMIUM=1 but {why}")
        pytest.skip(why)
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in [*browser.FLAGS, "--disable-quic", f"--user-data-dir={profile}", f"--window-size={width},{height}"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver_path), options=options)
