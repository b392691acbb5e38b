"""Lesson 22 simulated on N GPUs: seconds per run, each rank's peak, and where each strategy fits.

    python bench/many_gpus_sim.py                          # N = 2, 8, 1024; every variant
    python bench/many_gpus_sim.py --gpus 2,4,8,64,1024 --capacity 24GB,40GB,80GB --json out.json
    python bench/many_gpus_sim.py --gpus 1024 --variant fsdp --variant zero1

Each (N, variant) is one sim run in this process (the worker's path: `measure_request`): the fake process
group makes this process rank 0 of N (lab/measure/distributed.py), the model is Qwen2-1.5B at
lesson 22's seed sizes (batch 2 × 1,024 tokens per rank, fp32, AdamW). The bar (issue 13): 8 and
1,024 ranks in under a minute each on a 2-core machine — the `s` column, worker start-up not
included (a worker imports torch and transformers first: see bench/sim_speed.py).
Peaks beyond the validated rank counts are rank-0 extrapolations without NCCL's buffers or the
CUDA context; the table says which.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="2,8,1024", help="rank counts, comma-separated")
    ap.add_argument("--variant", action="append", help="lesson 22 variant(s); default: all")
    ap.add_argument("--capacity", default="24GB,40GB,80GB,141GB",
                    help="GPU sizes to test the peaks against, comma-separated")
    ap.add_argument("--scale", default="seed", choices=["seed", "small"])
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = ap.parse_args()

    from lab.course.curriculum import load_course
    from lab.measure.distributed import extrapolation_note
    from lab.runner.protocol import RunRequest
    from lab.report.units import format_bytes, parse_size
    from lab.runner.worker import load_experiment, measure_request

    lesson = next(l for l in load_course().lessons if l.id == "many-gpus")
    module = load_experiment(str(lesson.experiment_path))
    variants = args.variant or [v.name for v in lesson.variants]
    caps = [(c, parse_size(c)) for c in args.capacity.split(",") if c]
    ns = [int(n) for n in args.gpus.split(",") if n]

    rows = []
    print(f"{'N':>5} {'variant':10} {'s':>6} {'per-GPU peak':>14} {'phase':12} "
          + " ".join(f"{c:>6}" for c, _ in caps) + "  (fits?)")
    for n in ns:
        for v in variants:
            t = time.perf_counter()
            r = measure_request(RunRequest.for_lesson(lesson, v, "sim", args.scale, timing=False,
                                                      overrides={"world_size": n}),
                                getattr(module, v))
            s = time.perf_counter() - t
            fits = ["yes" if r.ok and r.peak.bytes <= b else "no" for _, b in caps]
            rows.append({"gpus": n, "variant": v, "status": r.status, "seconds": round(s, 2),
                         "peak_bytes": r.peak.bytes, "peak_phase": r.peak.phase,
                         "by_category": r.peak.by_category,
                         "fits": dict(zip([c for c, _ in caps], fits)),
                         "extrapolated": extrapolation_note(n) is not None})
            mark = "*" if extrapolation_note(n) else " "
            print(f"{n:>5} {v:10} {s:6.1f} {format_bytes(r.peak.bytes):>13}{mark} "
                  f"{r.peak.phase:12} " + " ".join(f"{f:>6}" for f in fits)
                  + (f"  {r.status}: {r.error}" if not r.ok else ""), flush=True)
    if any(row["extrapolated"] for row in rows):
        print("\n* " + extrapolation_note(max(ns)).replace(f"{max(ns)} ranks", "N ranks"))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0 if all(row["status"] == "ok" for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
