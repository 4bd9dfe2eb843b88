"""bench_kernel.py's PyTorch worker: SDPA on the CPU, in a process of its own.

    python benchmarks/_torch_sdpa.py [--quick] [--repeat N] [--threads N]

Prints one JSON line. Without PyTorch it prints {"skipped": "..."} and exits 0: PyTorch is an
optional extra (`pip install -e '.[torch]'`), never required.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
    except Exception as exc:  # noqa: BLE001  ImportError, or a broken install: either way, skip
        print(json.dumps({"skipped": f"PyTorch not importable ({type(exc).__name__}: {exc})"}))
        return 0
    import numpy as np

    from _kernel_cases import best_times, cases, dense_attention, inputs

    torch.set_num_threads(args.threads)
    out = {"torch": torch.__version__, "cases": []}
    for case in cases(args.quick)[0]:
        q, k, v, q_pos, k_pos = inputs(case)
        tq, tk, tv = (torch.from_numpy(x)[None, None] for x in (q, k, v))  # [1, 1, n, D]: one head
        tq_pos, tk_pos = torch.from_numpy(q_pos), torch.from_numpy(k_pos)

        def sdpa():
            # the explicit bottom-right mask, from positions, as in the dense numpy baseline
            mask = (tk_pos[None, :] >= 0) & (tk_pos[None, :] <= tq_pos[:, None])  # [T, S]
            if case.window is not None:
                mask &= tk_pos[None, :] > tq_pos[:, None] - case.window
            return F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask)

        with torch.inference_mode():
            o = sdpa()[0, 0].numpy()
            t = best_times({"sdpa": sdpa}, args.repeat, 3.0 if args.quick else 20.0)["sdpa"]
        o_dense, _ = dense_attention(q, k, v, q_pos, k_pos, case.window)
        out["cases"].append({"id": case.id, "sdpa_s": t, "o_error": float(np.abs(o - o_dense).max())})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
