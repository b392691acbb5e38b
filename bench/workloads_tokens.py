"""Every combination token on one workload, measured: the peak, and the optimizer state held at
the peak beside the analytic state bytes per parameter the result reports.

    python bench/workloads_tokens.py mlp --mode sim
    python bench/workloads_tokens.py gpt2-small --mode cuda --scale seed --out $OUT/tokens.json

Each combination runs in its own worker (as `memlab compare` does). Prints a table; --out also
writes the comparison as JSON (`memlab export` reads it). Numbers, never asserts.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMBOS = ["baseline", "sgd", "momentum", "adam", "fused", "forloop", "bf16", "fp16", "pure-bf16",
          "ckpt", "accum4", "zero_grads", "eval"]


def main() -> int:
    from lab.playground import ComparePlan, run_compare
    from lab.runner.client import SubprocessRunner
    from lab.workloads import get_workload, parse_combos

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload")
    ap.add_argument("--mode", default="sim", choices=["cuda", "cpu", "sim"])
    ap.add_argument("--scale", default=None, choices=["small", "seed"])
    ap.add_argument("--combo", action="append", help="default: one per token")
    ap.add_argument("--out", help="write the comparison as JSON here")
    args = ap.parse_args()
    w = get_workload(args.workload)
    scale = args.scale or ("small" if args.mode == "cpu" else "seed")
    combos = [c for c in parse_combos(args.combo or COMBOS)
              if not (c.kinds() - set(w.supports))]
    plan = ComparePlan(w.name, w.default_sizes(scale), combos, args.mode, scale, timing=False)
    c = run_compare(plan, SubprocessRunner(),
                    on_result=lambda r: print(f"  {r.variant}: {r.status}", file=sys.stderr))
    print(f"{w.name} · {args.mode} · {scale} · {plan.sizes}")
    print(f"{'combination':<14} {'status':<6} {'peak B':>15} {'opt. state B':>15} "
          f"{'analytic B':>15}  optimizer")
    for r in c.results:
        opt = r.params.get("optimizer") or {}
        cats = r.peak.by_category
        itemsize = 2 if r.params.get("config", {}).get("precision") == "pure-bf16" else 4
        n = cats.get("parameters", 0) // itemsize
        analytic = opt.get("state_bytes_per_param", 0) * n if opt else 0
        print(f"{r.variant:<14} {r.status:<6} {r.peak.bytes:>15,} "
              f"{cats.get('optimizer_state', 0):>15,} {analytic:>15,}  "
              f"{opt.get('cls', '-')} foreach={opt.get('foreach')} fused={opt.get('fused')}")
    if args.out:
        Path(args.out).write_text(json.dumps(c.to_dict(), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
