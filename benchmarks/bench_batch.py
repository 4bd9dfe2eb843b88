"""Batch throughput: submissions graded per minute, per core, with 1 and 2 workers.

    python benchmarks/bench_batch.py            # 8 submissions of every exercise (about two minutes)
    python benchmarks/bench_batch.py --quick    # CI: 3 submissions of decode_mask

Each run is a whole `kvgrade batch` in a fresh process into a fresh folder (a reused folder
would skip unchanged submissions). The baseline, measured in the same run, is the same
submission graded by `kvgrade grade` one after another: ratios against it say what a batch's
workers buy on this machine, whatever its speed or load today.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_grading import batch_folder, kvgrade, timed  # a sibling script, not a package

WORKERS = (1, 2)


def batch_minutes(cohort: Path, count: int, jobs: int, exercise_args: list[str], scratch: Path) -> float:
    """Submissions per minute of one `kvgrade batch --jobs N` over the cohort."""
    out = Path(tempfile.mkdtemp(prefix=f"out-{jobs}-", dir=scratch))
    seconds = timed(kvgrade("batch", str(cohort), *exercise_args, "--out", str(out / "batch"), "--jobs", str(jobs)), 1)
    return count * 60 / seconds


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 submissions of decode_mask only (for CI)")
    args = parser.parse_args(argv)
    count = 3 if args.quick else 8
    exercise_args = ["-e", "decode_mask"] if args.quick else []
    with tempfile.TemporaryDirectory(prefix="kvgrade-bench-batch-") as tmp:
        cohort = batch_folder(Path(tmp), count)
        one = next(cohort.iterdir())
        baseline = 60 / timed(kvgrade("grade", str(one), *exercise_args, "--json", os.devnull), 2 if args.quick else 3)
        rates = {jobs: batch_minutes(cohort, count, jobs, exercise_args, Path(tmp)) for jobs in WORKERS}
    print(f"batch throughput: {count} submissions of {'decode_mask' if args.quick else 'every exercise'}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    print(f"baseline: `kvgrade grade` one after another, {baseline:.1f} submissions per minute")
    print("| workers | submissions / min | per core | per core / baseline | vs 1 worker |")
    print("|---|---|---|---|---|")
    for jobs, rate in rates.items():
        print(f"| {jobs} | {rate:.1f} | {rate / jobs:.1f} | {rate / jobs / baseline:.2f} | {rate / rates[1]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
