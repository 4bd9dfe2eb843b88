"""How long a candidate waits: wall time of `kvgrade grade` and `kvgrade verify`, and where it goes.

    python benchmarks/bench_grading.py            # full table (about a minute and a half)
    python benchmarks/bench_grading.py --quick    # CI: one repetition of the two grade commands

Each figure is the minimum over repetitions of a whole command run in a fresh process, as a
user would run it. The phase table splits one grading of all exercises into: starting Python
and importing kvgrade, starting the candidate children (import of numpy and the module),
time inside candidate code (measured by the child), and the rest (checks, oracles, own tests).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"all exercises": 5.0, "one exercise (decode_mask)": 1.5, "verify": 60.0, "batch of 20": 60.0}


def timed(argv, repeat):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        if done.returncode not in (0,):
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-800:]}{done.stderr[-800:]}")
    return best


def kvgrade(*args):
    return [sys.executable, "-m", "grader", *args]


def batch_folder(tmp: Path, count: int) -> Path:
    from grader import catalog

    root = tmp / "batch"
    for i in range(count):
        folder = root / f"candidate{i:02d}"
        folder.mkdir(parents=True)
        for ex in catalog.exercises():
            shutil.copyfile(ex.reference_path, folder / ex.reference_path.name)
            own = ex.reference_path.with_name(f"test_{ex.id}.py")
            if own.exists():
                shutil.copyfile(own, folder / own.name)
    return root


def phases(repeat):
    """Split one grading of all exercises, in this process, into its parts."""
    import_start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "import grader.cli"], cwd=ROOT)
    import_seconds = time.perf_counter() - import_start
    assert done.returncode == 0
    from grader import engine
    from grader.sandbox import client

    spent = {"candidate": 0.0, "children": 0.0}
    real_start, real_request = client.Sandbox.start, client.Worker.request

    def start(self):
        t = time.perf_counter()
        try:
            return real_start(self)
        finally:
            spent["children"] += time.perf_counter() - t

    def request(self, *args, **kwargs):
        reply = real_request(self, *args, **kwargs)
        spent["candidate"] += reply[2].seconds
        return reply

    client.Sandbox.start, client.Worker.request = start, request
    try:
        t = time.perf_counter()
        engine.grade(ROOT / "solutions")
        total = time.perf_counter() - t
    finally:
        client.Sandbox.start, client.Worker.request = real_start, real_request
    return {"python start + import kvgrade": import_seconds,
            "start children (parallel; summed)": spent["children"],
            "inside candidate code": spent["candidate"],
            "grading in-process, total": total}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one repetition of the grade commands only")
    args = parser.parse_args()
    repeat = 1 if args.quick else 3
    rows = [("all exercises", timed(kvgrade("grade", "solutions"), repeat)),
            ("one exercise (decode_mask)", timed(kvgrade("grade", "solutions", "-e", "decode_mask"), repeat))]
    if not args.quick:
        rows.append(("verify", timed(kvgrade("verify"), 1)))
        with tempfile.TemporaryDirectory() as tmp:
            root = batch_folder(Path(tmp), 20)
            rows.append(("batch of 20", timed(kvgrade("batch", str(root), "--out", str(Path(tmp) / "out"),
                                                   "--trust-submissions"), 1)))
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"{'command':<32} {'seconds':>8} {'target':>8}")
    for name, seconds in rows:
        target = TARGETS.get(name)
        verdict = "" if target is None else ("  ok" if seconds <= target else "  OVER")
        print(f"{name:<32} {seconds:8.2f} {target if target else '':>8}{verdict}")
    if not args.quick:
        print()
        print(f"{'phase (grade all, one run)':<40} {'seconds':>8}")
        for name, seconds in phases(repeat).items():
            print(f"{name:<40} {seconds:8.2f}")


if __name__ == "__main__":
    main()
