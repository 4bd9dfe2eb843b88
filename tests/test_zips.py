"""Malformed zips through the real CLI (issue 24, item 2): one line and exit 2 each, a row in a
batch, and a directory of 1.5 million entries refused from its end record, before it is parsed."""
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import catalog
from grader.cli import main

ROOT = Path(__file__).resolve().parent.parent
MODULE = (catalog.KIT_ROOT / "solutions" / "tree_mask.py").read_bytes()


def encrypted(path: Path) -> Path:
    """A zip whose one entry is flagged encrypted (bit 0 of its flags, in both headers)."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tree_mask.py", MODULE)
    data = bytearray(path.read_bytes())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + flags_at
        data[at:at + 2] = struct.pack("<H", 0x1)
    path.write_bytes(data)
    return path


def corrupt_deflate(path: Path) -> Path:
    """A deflated entry whose stream starts with a reserved block type."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tree_mask.py", MODULE)
    data = bytearray(path.read_bytes())
    start = 30 + len("tree_mask.py")  # the local header, then the entry's name, then its data
    data[start:start + 16] = b"\xff" * 16
    path.write_bytes(data)
    return path


def huge_directory(path: Path, entries: int = 1_500_000) -> Path:
    """One real entry, and a central directory naming it ``entries`` times (about 70 MB)."""
    name = b"a"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name),
                          0, 0, 0, 0, 0, 0) + name
    directory = central * entries
    # zip64 end records: the entry count does not fit the classic record's 16 bits
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, len(directory), len(local))
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(local) + len(directory), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path.write_bytes(local + directory + end64 + locator + end)
    return path


# The grader's peak memory, from a small launcher: a child forked from this (large) test process
# would count the pages it shared with it before exec.
PEAK = ("import os, subprocess, sys\n"
        "p = subprocess.Popen(sys.argv[1:])\n"
        "_, status, usage = os.wait4(p.pid, 0)\n"
        "sys.stderr.write(f'peak {usage.ru_maxrss}')\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n")

MALFORMED = {"encrypted": (encrypted, "encrypted entry"), "corrupt_deflate": (corrupt_deflate, "not a readable zip"),
             "huge_directory": (huge_directory, "1,500,000 entries")}


@pytest.mark.parametrize("kind", MALFORMED)
def test_a_malformed_zip_is_one_line_and_exit_2(tmp_path, kind):
    make, words = MALFORMED[kind]
    archive = make(tmp_path / f"{kind}.zip")
    proc = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "grader", "grade", str(archive), "-e",
                           "tree_mask", "--seed", "0"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    err, peak = proc.stderr.rsplit("peak ", 1)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("Usage:", "Try "))]
    assert proc.returncode == 2 and proc.stdout == "", err
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in err, err
    assert int(peak) < 300 << 10, f"the grader peaked at {int(peak) >> 10} MiB"  # KiB on Linux


def test_huge_directory_is_refused_before_zipfile_parses_it(tmp_path, monkeypatch):
    small = zipfile.ZipFile(huge_directory(tmp_path / "small.zip", 3))
    assert [i.filename for i in small.infolist()] == ["a"] * 3  # well formed: zipfile reads every entry
    parsed = []
    monkeypatch.setattr(zipfile.ZipFile, "_RealGetContents", lambda self: parsed.append(self))
    out = CliRunner().invoke(main, ["grade", str(huge_directory(tmp_path / "big.zip", 70_000)), "--seed", "0"])
    assert out.exit_code == 2 and "70,000 entries" in out.output and parsed == []


@pytest.mark.slow
def test_in_a_batch_each_malformed_zip_is_a_row(tmp_path):
    cohort = tmp_path / "cohort"
    cohort.mkdir()
    for kind, (make, _) in MALFORMED.items():
        make(cohort / f"{kind}.zip")
    (cohort / "fine").mkdir()
    (cohort / "fine" / "tree_mask.py").write_bytes(MODULE)
    out = CliRunner().invoke(main, ["batch", str(cohort), "-e", "tree_mask", "--seed", "0", "--out",
                                    str(tmp_path / "out"), "--jobs", "1", "--trust-submissions"])
    assert out.exit_code == 0, out.output
    rows = json.loads((tmp_path / "out" / "manifest.json").read_text())["entries"]
    assert rows["fine"]["row"]["level"] == "strong_hire"
    for kind, (_, words) in MALFORMED.items():
        error = next(e["row"]["error"] for name, e in rows.items() if name.startswith(kind))
        assert words in error and "\n" not in error
