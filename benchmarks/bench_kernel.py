"""Does tile skipping pay? The fused reference kernel against dense attention, same inputs.

    python benchmarks/bench_kernel.py            # the full table (under a minute)
    python benchmarks/bench_kernel.py --quick    # CI: small sizes, a few seconds
    python benchmarks/bench_kernel.py --sweep    # also time block sizes around the defaults (~3 min)

Compared, on float32, one head, D = 64, contiguous positions:
  fused  solutions/fused_attention.py: flash_attention(q, kv, q_positions, window=...) with
         the contract's default tiles (block_q=64, block_k=128), reading a KVSource whose
         load() returns views of the K and V arrays (no copy);
  dense  what a user writes first: q @ k.T * scale, np.where(mask, s, -inf) with the
         bottom-right (and window) mask built from positions, softmax with max subtraction,
         @ v;
  SDPA   torch.nn.functional.scaled_dot_product_attention on the CPU with an explicit boolean
         bottom-right mask built from positions, when PyTorch is installed (optional extra
         `torch`; without it that table is skipped with a line saying so).

Each library runs in its own process (numpy's and PyTorch's thread pools would fight over the
cores), one BLAS thread each by default (--threads). Each figure is the minimum over several
calls and over --rounds alternating runs of the workers; the ratios printed are of figures
measured in the same run. Timings never fail the run: the exit status is 1 only when the fused
output disagrees with dense (or a worker crashes), so CI can run --quick to keep this working.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

BLOCK_Q, BLOCK_K = 64, 128  # the contract's defaults, passed explicitly
TOLERANCE = 1e-4  # fused vs dense, float32: max |difference| of o, and of lse
BLOCK_Q_SWEEP = (16, 32, 64, 128, 256)
BLOCK_K_SWEEP = (64, 128, 256, 512, 1024)


# ---------------------------------------------------------------------------- numpy worker


class ViewSource:
    """A KVSource serving views of in-memory K and V: what a cache in RAM costs to read."""

    def __init__(self, k, v, positions):
        self.k, self.v, self.positions = k, v, positions

    def __len__(self):
        return len(self.positions)

    def load(self, start, stop):
        return self.k[start:stop], self.v[start:stop]


class CountingSource(ViewSource):
    """The same, recording every (start, stop): used for one untimed call per case."""

    def __init__(self, k, v, positions):
        super().__init__(k, v, positions)
        self.loads = []

    def load(self, start, stop):
        self.loads.append((start, stop))
        return super().load(start, stop)


def blas_description() -> dict:
    import numpy as np

    info = {"numpy": np.__version__, "blas": "?", "kernel": None, "threads": None}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["blas"] = f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001  older numpy: leave "?"
        pass
    try:
        import threadpoolctl

        for pool in threadpoolctl.threadpool_info():
            if pool.get("user_api") == "blas":
                info.update(kernel=pool.get("architecture"), threads=pool.get("num_threads"))
    except ImportError:
        pass
    return info


def sgemm_gflops(repeat: int, n: int) -> float:
    """numpy's own float32 matmul speed on an n x n x n product: the ceiling for this machine."""
    import numpy as np

    from _kernel_cases import best_times

    a, b = (np.random.default_rng(n + i).standard_normal((n, n), dtype=np.float32) for i in range(2))
    t = best_times({"mm": lambda: a @ b}, repeat, budget=5.0)["mm"]
    return 2.0 * n ** 3 / t / 1e9


def numpy_worker(args) -> dict:
    import tracemalloc

    import numpy as np

    sys.path.insert(0, str(ROOT / "solutions"))  # the reference imports its siblings by name
    from _kernel_cases import best_times, cases, dense_attention, fused_work, inputs
    from fused_attention import flash_attention

    case_list, memory_case = cases(args.quick)
    budget = 3.0 if args.quick else 20.0
    out = {"env": blas_description(), "cases": [], "sweep": []}
    for case in case_list:
        q, k, v, q_pos, k_pos = inputs(case)
        source = ViewSource(k, v, k_pos)
        fused = lambda: flash_attention(q, source, q_pos, window=case.window, block_q=BLOCK_Q, block_k=BLOCK_K)  # noqa: E731
        dense = lambda: dense_attention(q, k, v, q_pos, k_pos, case.window)  # noqa: E731
        (o_f, lse_f), (o_d, lse_d) = fused(), dense()
        counting = CountingSource(k, v, k_pos)
        flash_attention(q, counting, q_pos, window=case.window, block_q=BLOCK_Q, block_k=BLOCK_K)
        times = best_times({"fused": fused, "dense": dense}, args.repeat, budget)
        out["cases"].append({
            **case.as_dict(),
            "fused_s": times["fused"], "dense_s": times["dense"],
            "o_error": float(np.abs(o_f - o_d).max()), "lse_error": float(np.abs(lse_f - lse_d).max()),
            "dtype": str(o_f.dtype),
            "loads": len(counting.loads), "keys_loaded": sum(b - a for a, b in counting.loads),
            "work": fused_work(case, BLOCK_Q, BLOCK_K),
        })
        if args.sweep:  # every block size in turn within each repetition, so noise hits all alike
            sizes = [(bq, bk) for bq in (BLOCK_Q_SWEEP if case.T > 1 else (BLOCK_Q,)) for bk in BLOCK_K_SWEEP]
            calls = {size: functools.partial(flash_attention, q, source, q_pos, window=case.window,
                                             block_q=size[0], block_k=size[1]) for size in sizes}
            for (bq, bk), t in best_times(calls, args.repeat, 3 * budget).items():
                out["sweep"].append({"case": case.id, "block_q": bq, "block_k": bk, "fused_s": t})
    q, k, v, q_pos, k_pos = inputs(memory_case)
    source = ViewSource(k, v, k_pos)
    peaks = {}
    for name, fn in (("fused", lambda: flash_attention(q, source, q_pos, block_q=BLOCK_Q, block_k=BLOCK_K)),
                     ("dense", lambda: dense_attention(q, k, v, q_pos, k_pos))):
        tracemalloc.start()
        fn()
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    out["memory"] = {**memory_case.as_dict(), "fused_bytes": peaks["fused"], "dense_bytes": peaks["dense"]}
    out["sgemm_n"] = 512 if args.quick else 1024
    out["sgemm_gflops"] = sgemm_gflops(args.repeat, out["sgemm_n"])
    return out


# ---------------------------------------------------------------------------- orchestration


def run_worker(argv: list[str], threads: int) -> dict:
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"worker {' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def merge_min(runs: list[dict], key: str, fields: tuple[str, ...]) -> list[dict]:
    """Per case, the minimum of each timing field over all runs of one worker."""
    merged = [dict(c) for c in runs[0][key]]
    for run in runs[1:]:
        for into, c in zip(merged, run[key]):
            for f in fields:
                into[f] = min(into[f], c[f])
    return merged


def verdict(ratio: float, target: float | None, quick: bool, percent: bool = False) -> str:
    if target is None:
        return "-"
    bound = f"<= {target:.0%}" if percent else f"<= {target:g}"
    if quick:
        return f"{bound} (full sizes)"
    return f"{bound} {'ok' if ratio <= target else 'MISSED'}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if seconds < 1 else f"{seconds * 1e3:.0f}"


def dense_flops_of(c: dict) -> float:
    from _kernel_cases import D

    return 4.0 * D * c["T"] * c["S"]


def print_tables(numpy_runs, torch_runs, args) -> bool:
    """Print every table; return True when fused agrees with dense on every case."""
    env = numpy_runs[0]["env"]
    cases = merge_min(numpy_runs, "cases", ("fused_s", "dense_s"))
    sgemm = max(r["sgemm_gflops"] for r in numpy_runs)
    rounds, threads = len(numpy_runs), args.threads
    kernel = f", OpenBLAS kernel {env['kernel']}" if env.get("kernel") else ""
    overrides = ", ".join(f"{var}={os.environ[var]}" for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
                          if var in os.environ) or "OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset"
    print(f"# fused attention kernel vs dense numpy{' (--quick: small sizes)' if args.quick else ''}")
    print(f"float32, one head, D = 64, block_q = {BLOCK_Q}, block_k = {BLOCK_K}; "
          f"numpy {env['numpy']} ({env['blas']}{kernel}, "
          f"{overrides}); {threads} BLAS thread(s) per process; "
          f"min over {args.repeat} calls x {rounds} round(s); {os.cpu_count()} CPUs")
    print()
    print("| case | T | S | window | fused ms | dense ms | fused / dense | target | key tiles loaded | loads "
          "| fused GFLOP/s | dense GFLOP/s |")
    print("|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|")
    agree = True
    for c in cases:
        ratio = c["fused_s"] / c["dense_s"]
        work = c["work"]
        print(f"| {c['name']} | {c['T']:,} | {c['S']:,} | {c['window'] or '-'} | {ms(c['fused_s'])} | "
              f"{ms(c['dense_s'])} | {ratio:.2f} | {verdict(ratio, c['target'], args.quick)} | "
              f"{work['tile_fraction']:.1%} | {c['loads']} | {work['flops'] / c['fused_s'] / 1e9:.1f} | "
              f"{dense_flops_of(c) / c['dense_s'] / 1e9:.1f} |")
        if max(c["o_error"], c["lse_error"]) > TOLERANCE or c["dtype"] != "float32":
            agree = False
            print(f"FUSED DISAGREES WITH DENSE on {c['name']}: max |o diff| {c['o_error']:.2e}, "
                  f"max |lse diff| {c['lse_error']:.2e}, dtype {c['dtype']} (tolerance {TOLERANCE:g}, float32)")
        if c["keys_loaded"] != work["keys"]:
            print(f"note: on {c['name']} the kernel read {c['keys_loaded']:,} keys; the rule needs "
                  f"{work['keys']:,} (visible tiles, whole)")
    memory = numpy_runs[0]["memory"]
    share = memory["fused_bytes"] / memory["dense_bytes"]
    print()
    print("| peak memory of one call (tracemalloc) | T | S | fused MB | dense MB | fused / dense | target |")
    print("|---|--:|--:|--:|--:|--:|---|")
    print(f"| no window | {memory['T']:,} | {memory['S']:,} | {memory['fused_bytes'] / 1e6:.2f} | "
          f"{memory['dense_bytes'] / 1e6:.1f} | {share:.1%} | "
          f"{verdict(share, memory['target'], args.quick, percent=True)} |")
    print()
    print(f"numpy's own float32 matmul, {numpy_runs[0]['sgemm_n']}^3: {sgemm:.1f} GFLOP/s on this machine "
          f"(the ceiling for the GFLOP/s columns). GFLOP/s count 4 * D FLOPs per (query, key) pair computed: "
          f"the loaded tiles for fused, all T x S pairs for dense.")
    print()
    print_torch(torch_runs, cases, args)
    if args.sweep:
        print()
        print_sweep(numpy_runs, cases)
    return agree


def print_torch(torch_runs, cases, args):
    if torch_runs is None:
        print("PyTorch SDPA: not run (--no-torch)")
        return
    if "skipped" in torch_runs[0]:
        print(f"PyTorch SDPA: skipped, {torch_runs[0]['skipped']} (optional: pip install -e '.[torch]')")
        return
    sdpa = merge_min(torch_runs, "cases", ("sdpa_s",))
    print(f"## against PyTorch SDPA (torch {torch_runs[0]['torch']}, CPU, {args.threads} thread(s), own process)")
    print()
    print("| case | T | S | window | SDPA ms | fused ms | fused / SDPA | target | SDPA max abs diff to dense |")
    print("|---|--:|--:|--:|--:|--:|--:|---|--:|")
    for c, t in zip(cases, sdpa):
        ratio = c["fused_s"] / t["sdpa_s"]
        print(f"| {c['name']} | {c['T']:,} | {c['S']:,} | {c['window'] or '-'} | {ms(t['sdpa_s'])} | "
              f"{ms(c['fused_s'])} | {ratio:.2f} | {verdict(ratio, c['sdpa_target'], args.quick)} | "
              f"{t['o_error']:.1e} |")


def print_sweep(numpy_runs, cases):
    print(f"## block sizes: fused time relative to the defaults (block_q = {BLOCK_Q}, block_k = {BLOCK_K}), "
          "lower is faster")
    sweep = {}
    for run in numpy_runs:
        for s in run["sweep"]:
            key = (s["case"], s["block_q"], s["block_k"])
            sweep[key] = min(sweep.get(key, float("inf")), s["fused_s"])
    for c in cases:
        base = sweep.get((c["id"], BLOCK_Q, BLOCK_K))
        rows = sorted({bq for (cid, bq, _) in sweep if cid == c["id"]})
        if not base or not rows:
            continue
        print()
        print(f"{c['name']} (T = {c['T']:,}, S = {c['S']:,}; default {ms(base)} ms)")
        print()
        print("| block_q \\ block_k | " + " | ".join(str(bk) for bk in BLOCK_K_SWEEP) + " |")
        print("|--:|" + "--:|" * len(BLOCK_K_SWEEP))
        for bq in rows:
            cells = [f"{sweep[(c['id'], bq, bk)] / base:.2f}" for bk in BLOCK_K_SWEEP]
            print(f"| {bq if c['T'] > 1 else 'any'} | " + " | ".join(cells) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one round: a few seconds (CI)")
    parser.add_argument("--sweep", action="store_true", help="also time block_q x block_k around the defaults")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per case and round (default 15, quick 3)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating runs of each worker (default 2, quick 1)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS / PyTorch threads per worker (default 1)")
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out even when it is installed")
    parser.add_argument("--worker", choices=["numpy"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (3 if args.quick else 15)
    args.rounds = args.rounds or (1 if args.quick else 2)
    if args.worker == "numpy":
        print(json.dumps(numpy_worker(args)))
        return 0
    common = [*(["--quick"] if args.quick else []), "--repeat", str(args.repeat), "--threads", str(args.threads)]
    numpy_runs, torch_runs = [], None if args.no_torch else []
    for _ in range(args.rounds):  # alternate the workers so that a slow spell hits both
        numpy_runs.append(run_worker([str(Path(__file__)), "--worker", "numpy", *common,
                                      *(["--sweep"] if args.sweep else [])], args.threads))
        if torch_runs is not None and not (torch_runs and "skipped" in torch_runs[0]):
            torch_runs.append(run_worker([str(HERE / "_torch_sdpa.py"), *common], args.threads))
    return 0 if print_tables(numpy_runs, torch_runs, args) else 1


if __name__ == "__main__":
    sys.exit(main())
