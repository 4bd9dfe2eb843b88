"""The committed editor bundle is what room-editor/ builds from its lock file.

A clean checkout installs with pip alone, so grader/room/static/editor.js (and its licence
file) are committed; this test rebuilds them with `npm ci` and the build script in a copy of
room-editor/ and compares bytes, where npm is at hand.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "room-editor"
BUILT = ("editor.js", "editor.LICENSE.txt")


def test_the_committed_bundle_is_what_the_lock_file_builds(tmp_path):
    npm, node = shutil.which("npm"), shutil.which("node")
    if not (npm and node):
        pytest.skip("npm and node are not installed: the committed bundle cannot be rebuilt here")
    work = tmp_path / "room-editor"
    work.mkdir()
    for name in ("package.json", "package-lock.json", "build.mjs"):
        shutil.copyfile(SOURCE / name, work / name)
    shutil.copytree(SOURCE / "src", work / "src")
    out = tmp_path / "grader" / "room" / "static"
    out.mkdir(parents=True)
    for command in ([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], [node, "build.mjs"]):
        done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"{' '.join(command)}: {done.stderr[-2000:]}"
    for name in BUILT:
        assert (out / name).read_bytes() == (REPO / "grader" / "room" / "static" / name).read_bytes(), (
            f"{name} differs from what room-editor/ builds: run `npm ci && npm run build` in room-editor/")
