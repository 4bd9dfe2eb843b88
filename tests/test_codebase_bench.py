"""benchmarks/bench_grading.py --against REV: per-exercise grading-time ratios, now / REV, measured
side by side in one run. Timings never fail a test: only the table's shape is asserted."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_ratios_against_a_revision(tmp_path):
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, check=False).returncode != 0:
        pytest.skip("not a git checkout: there is no revision to compare with")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_grading.py"), "--against", "HEAD",
                           "-e", "decode_mask", "--rounds", "1", "--limit", "1000"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| exercise | now s | HEAD s | now / then | within 1000.0x |" in done.stdout
    row = re.search(r"^\| decode_mask \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| yes \|$", done.stdout, re.M)
    assert row, done.stdout
    now, then, ratio = map(float, row.groups())
    assert now > 0 and then > 0 and abs(ratio - now / then) < 0.01
