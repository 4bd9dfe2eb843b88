"""The kernel benchmark keeps running: its quick mode, as CI runs it (timings never fail it)."""
import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


def run(*argv, timeout=60):
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_kernel_benchmark_quick_prints_its_tables():
    done = run(str(BENCH / "bench_kernel.py"), "--quick", "--sweep")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "| case | T | S | window | fused ms | dense ms | fused / dense |" in out
    for case in ("plain decode", "speculative verify", "chunked prefill", "full prefill", "windowed chunk"):
        assert f"| {case} |" in out
    assert "peak memory of one call" in out and "GFLOP/s on this machine" in out
    assert "DISAGREES" not in out
    assert "block sizes: fused time relative to the defaults" in out
    # PyTorch is optional: either its table or one line saying it was skipped
    assert ("against PyTorch SDPA" in out) != ("PyTorch SDPA: skipped" in out)


def test_torch_worker_skips_cleanly_without_torch():
    blocked = ("import runpy, sys; sys.modules['torch'] = None; "  # import torch now raises ImportError
               f"sys.argv = ['_torch_sdpa.py', '--quick']; "
               f"runpy.run_path({str(BENCH / '_torch_sdpa.py')!r}, run_name='__main__')")
    done = run("-c", blocked)
    assert done.returncode == 0, done.stderr
    assert "PyTorch not importable" in json.loads(done.stdout.strip().splitlines()[-1])["skipped"]


def test_disagreement_is_reported_and_fails_the_run(capsys):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_kernel
    finally:
        sys.path.remove(str(BENCH))
    case = {"id": "decode", "name": "plain decode", "T": 1, "S": 10, "window": None, "target": 1.5,
            "sdpa_target": 2.0, "fused_s": 1e-3, "dense_s": 1e-3, "o_error": 0.5, "lse_error": 0.0,
            "dtype": "float32", "loads": 1, "keys_loaded": 10,
            "work": {"flops": 2560.0, "tile_fraction": 1.0, "keys": 10}}
    run_data = {"env": {"numpy": "x", "blas": "y"}, "cases": [case], "sweep": [], "sgemm_n": 8, "sgemm_gflops": 1.0,
                "memory": {"T": 1, "S": 10, "target": 0.05, "fused_bytes": 1, "dense_bytes": 100}}
    args = Namespace(quick=True, sweep=False, repeat=1, threads=1)
    assert bench_kernel.print_tables([run_data], None, args) is False
    assert "FUSED DISAGREES WITH DENSE on plain decode" in capsys.readouterr().out


@pytest.mark.slow
def test_grading_benchmark_quick_prints_its_table():
    # one grading of decode_mask (the full run's other rows time the same function on other commands)
    done = run(str(BENCH / "bench_grading.py"), "--quick", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "command" in done.stdout and "target" in done.stdout
    assert "one exercise (decode_mask)" in done.stdout and "all exercises" not in done.stdout


@pytest.mark.slow
def test_batch_benchmark_quick_prints_throughput_against_its_baseline():
    done = run(str(BENCH / "bench_batch.py"), "--quick", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| workers | submissions / min | per core | per core / baseline | vs 1 worker |" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2 and rows[0].endswith("| 1.00 |")
