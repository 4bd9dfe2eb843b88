"""How long a candidate waits: wall time of `kvgrade grade` and `kvgrade verify`, and where it goes.

    python benchmarks/bench_grading.py            # full table (about a minute and a half)
    python benchmarks/bench_grading.py --quick    # CI: one repetition of the one-exercise grade command
    python benchmarks/bench_grading.py --against eb99c8b [-e ID]... [--rounds N]
        # per exercise, `kvgrade grade solutions -e ID` now / at that revision, side by side

Each figure is the minimum over repetitions of a whole command run in a fresh process, as a
user would run it. With ``--against REV`` the revision is exported (``git archive``) into a
temporary folder, and each exercise's command is run there and here in turns, in one run (the
order alternating by round), so both sides meet the same load: the ratio is what to read.
The phase table splits one grading of all exercises into: starting Python
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
sys.path.insert(0, str(ROOT))  # grader from this checkout, installed or not
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


def exported(revision: str, into: Path) -> Path:
    """The tree of ``revision`` of this repository, written into ``into`` (no checkout, no branch)."""
    archive = subprocess.run(["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True,
                             check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision} failed: {archive.stderr.decode()[-400:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def grade_seconds(tree: Path, exercise_id: str) -> float:
    """One `kvgrade grade solutions -e ID` with ``tree``'s kit, in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader", "grade", "solutions", "-e", exercise_id], cwd=tree,
                          env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"grade -e {exercise_id} in {tree} failed ({done.returncode}): {done.stderr[-600:]}")
    return seconds


def against(revision: str, exercise_ids: list[str], rounds: int, limit: float) -> int:
    """Print, per exercise, the ratio of grading time now to grading time at ``revision``."""
    with tempfile.TemporaryDirectory(prefix="kvgrade-bench-") as tmp:
        then = exported(revision, Path(tmp))
        ids = [e for e in exercise_ids if (then / "exercises" / e).is_dir()]
        best = {(e, side): float("inf") for e in ids for side in ("now", "then")}
        for r in range(rounds):
            for e in ids:  # interleaved: each exercise's two commands back to back, the order alternating
                for side in (("now", "then") if r % 2 == 0 else ("then", "now")):
                    seconds = grade_seconds(ROOT if side == "now" else then, e)
                    best[e, side] = min(best[e, side], seconds)
    print(f"`kvgrade grade solutions -e ID`, now against {revision}: minimum of {rounds} runs each, interleaved; "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"| exercise | now s | {revision} s | now / then | within {limit}x |")
    print("|---|--:|--:|--:|---|")
    over = 0
    for e in ids:
        ratio = best[e, "now"] / best[e, "then"]
        over += ratio > limit
        verdict = "yes" if ratio <= limit else "NO"
        print(f"| {e} | {best[e, 'now']:.2f} | {best[e, 'then']:.2f} | {ratio:.2f} | {verdict} |")
    missing = sorted(set(exercise_ids) - set(ids))
    if missing:
        print(f"not at {revision} (no ratio): {', '.join(missing)}")
    return 1 if over else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="one repetition of the one-exercise grade command only (the table keeps running in CI)")
    parser.add_argument("--against", metavar="REV", help="a git revision: print per-exercise time ratios, now / REV")
    parser.add_argument("-e", "--exercise", dest="exercises", action="append", metavar="ID",
                        help="with --against: only this exercise (repeatable; default: every exercise)")
    parser.add_argument("--rounds", type=int, default=3, help="with --against: runs of each command per side")
    parser.add_argument("--limit", type=float, default=1.2, help="with --against: the ratio each must stay within")
    args = parser.parse_args()
    if args.against:
        from grader import catalog

        ids = args.exercises or [e.id for e in catalog.exercises()]
        raise SystemExit(against(args.against, ids, max(1, args.rounds), args.limit))
    repeat = 1 if args.quick else 3
    rows = [("one exercise (decode_mask)", timed(kvgrade("grade", "solutions", "-e", "decode_mask"), repeat))]
    if not args.quick:
        rows.insert(0, ("all exercises", timed(kvgrade("grade", "solutions"), repeat)))
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
