"""Headless Chromium for the tests: measure a page with a script, or take a screenshot."""
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        if os.environ.get("KVGRADE_REQUIRE_CHROMIUM") == "1":
            pytest.fail("KVGRADE_REQUIRE_CHROMIUM=1 but chromium is not installed")
        pytest.skip("chromium is not installed")
    return found


def _run(args: list, work: Path, width: int, height: int) -> str:
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={work / 'profile'}",
                           f"--window-size={width},{height}", *args],
                          check=True, capture_output=True, text=True, timeout=120)
    return done.stdout


def measure(page_html: str, expression: str, work: Path, width: int = 1280, height: int = 900):
    """Load the page at ``width`` px and return the JSON value of a JavaScript ``expression``
    evaluated once it has loaded (written into the DOM, read back with --dump-dom)."""
    script = ("<script>addEventListener('load', () => { const out = document.createElement('pre');"
              f" out.id = 'kvgrade-measured'; out.textContent = JSON.stringify({expression});"
              " document.body.appendChild(out); });</script>")
    page = work / "measured.html"
    page.write_text(page_html.replace("</body>", script + "</body>"))
    dom = _run(["--dump-dom", page.resolve().as_uri()], work, width, height)
    found = re.search(r'<pre id="kvgrade-measured">(.*?)</pre>', dom, re.S)
    assert found, "the page did not load: no measurement in the DOM"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def screenshot(page: Path, png: Path, work: Path, width: int = 1280, height: int = 900) -> tuple[int, int]:
    """A screenshot for people to look at; returns its (width, height) from the PNG header."""
    _run([f"--screenshot={png}", page.resolve().as_uri()], work, width, height)
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and header[12:16] == b"IHDR"
    return struct.unpack(">II", header[16:24])
