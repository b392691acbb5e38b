"""Sim and `memlab fit` against the H200 ground truth of the plain Hugging Face loop.

assets/ground_truth/h200_hf_loop.json was measured by bench/h200_ground_truth.py, a script that
uses no lab code: `AutoModelForCausalLM.from_config`, `model(input_ids=ids, labels=ids).loss`,
AdamW, two steps, `torch.cuda.max_memory_allocated()` / `max_memory_reserved()`, and the largest
batch that runs under `set_per_process_memory_fraction`. The lab runs the same loop as the
workload of each shipped config (lab/workloads/tasks.py HFModel) and never reads this file
(tests and bench scripts may).

    python bench/sim_vs_ground_truth.py [--only peak|fit|probes] [--json OUT.json]

peak:   every unconstrained case: sim's predicted max allocated / reserved vs the H200's (error %)
fit:    every largest-batch case: `memlab fit`'s answer vs the H200's, with its sim runs, the
        batches it asked about, wall and CPU seconds per combination (one process: the first
        combination also pays for importing transformers and warming the dispatcher)
probes: every batch the H200 tried under a cap: the allocator model's ok/oom and peaks
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GROUND_TRUTH = ROOT / "assets" / "ground_truth" / "h200_hf_loop.json"
GiB = 2**30


def combo_of(text: str):
    from lab.workloads import parse_combo

    return parse_combo(text.replace("fp32", "baseline"))


def sizes_of(model: str, seq: int, batch: int = 1) -> dict:
    return {"model": model, "batch": batch, "seq": seq, "steps": 2}


def pct(a: int, b: int) -> str:
    return f"{(a / b - 1) * 100:+.2f}%"


def peaks(cases: list[dict]) -> list[dict]:
    from lab.workloads.fit_sim import sim_recorder

    out = []
    print(f"{'model':<14} {'combo':<10} {'batch':>5}  {'alloc sim':>10} {'H200':>10} {'err':>7}"
          f"  {'reserved sim':>12} {'H200':>10} {'err':>7}  {'s':>5}")
    for c in cases:
        t = time.perf_counter()
        rec = sim_recorder(c["model"], sizes_of(c["model"], c["seq"]), combo_of(c["combo"]))(c["batch"])
        row = {"model": c["model"], "combo": c["combo"], "batch": c["batch"], "status": rec.status,
               "sim_allocated": rec.peak_allocated_bytes, "h200_allocated": c["max_allocated"],
               "sim_reserved": rec.peak_reserved_bytes, "h200_reserved": c["max_reserved"],
               "seconds": round(time.perf_counter() - t, 2)}
        out.append(row)
        print(f"{c['model']:<14} {c['combo']:<10} {c['batch']:>5}  "
              f"{rec.peak_allocated_bytes / 1e9:>8.3f}GB {c['max_allocated'] / 1e9:>8.3f}GB "
              f"{pct(rec.peak_allocated_bytes, c['max_allocated']):>7}  "
              f"{rec.peak_reserved_bytes / 1e9:>10.3f}GB {c['max_reserved'] / 1e9:>8.3f}GB "
              f"{pct(rec.peak_reserved_bytes, c['max_reserved']):>7}  {row['seconds']:>5}",
              flush=True)
    return out


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (fit forks one per combination)."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def fits(cases: list[dict]) -> list[dict]:
    from lab.workloads.fit_sim import predict, sim_recorder

    out = []
    print(f"{'model':<14} {'combo':<10} {'cap':>7}  {'fit':>4} {'H200':>4}  {'sim runs':>8} "
          f"{'batches':>7}  {'wall s':>6} {'cpu s':>6}")
    for c in cases:
        cfg = combo_of(c["combo"])
        t, cpu = time.perf_counter(), cpu_seconds()
        r = predict(sim_recorder(c["model"], sizes_of(c["model"], c["seq"]), cfg),
                    c["cap_gib"] * GiB, cfg)
        wall, cpu = time.perf_counter() - t, cpu_seconds() - cpu
        row = {"model": c["model"], "combo": c["combo"], "cap_gib": c["cap_gib"],
               "predicted": r.batch, "h200": c["largest_batch"], "status": r.status,
               "sim_runs": r.sim_runs, "batches": r.probes, "wall_s": round(wall, 2),
               "cpu_s": round(cpu, 2), "notes": r.notes}
        out.append(row)
        mark = "=" if r.batch == c["largest_batch"] else ("OVER" if (r.batch or 0) > c["largest_batch"]
                                                         else "under")
        print(f"{c['model']:<14} {c['combo']:<10} {c['cap_gib']:>4}GiB  {r.batch or 0:>4} "
              f"{c['largest_batch']:>4} {mark:<5} {r.sim_runs:>4} {r.probes:>7}  {wall:>6.1f} "
              f"{cpu:>6.1f}", flush=True)
    equal = sum(r["predicted"] == r["h200"] for r in out)
    over = sum((r["predicted"] or 0) > r["h200"] for r in out)
    print(f"{equal} of {len(out)} equal to the H200, {over} above it; wall s per combination: "
          f"median {sorted(r['wall_s'] for r in out)[len(out) // 2]}, max "
          f"{max(r['wall_s'] for r in out)} (the first pays the imports)")
    return out


def probes(cases: list[dict]) -> list[dict]:
    """Each batch the H200 ran under the cap, replayed by the allocator model under that cap."""
    from lab.measure.sim.allocator.replay import replay
    from lab.workloads.fit_sim import sim_recorder

    out = []
    for c in cases:
        rec = sim_recorder(c["model"], sizes_of(c["model"], c["seq"]), combo_of(c["combo"]))
        for p in c["probes"]:
            if p["batch"] > 64:  # the H200 doubled far past the answer; a few are enough
                continue
            r = replay(rec(p["batch"]).log, cap=c["cap_gib"] * GiB)
            sim = "oom" if r.oom else "ok"
            row = {"model": c["model"], "combo": c["combo"], "batch": p["batch"], "sim": sim,
                   "h200": p["status"], "sim_allocated": r.peak_allocated,
                   "h200_allocated": p["max_allocated"], "sim_reserved": r.peak_reserved,
                   "h200_reserved": p["max_reserved"]}
            out.append(row)
            print(f"{c['model']:<14} {c['combo']:<10} {c['cap_gib']:>3}GiB b{p['batch']:<4} "
                  f"sim {sim:<3} H200 {p['status']:<3} {'' if sim == p['status'] else 'DIFF'} "
                  f"alloc {r.peak_allocated / 1e9:7.3f} vs {p['max_allocated'] / 1e9:7.3f} GB  "
                  f"reserved {r.peak_reserved / 1e9:7.3f} vs {p['max_reserved'] / 1e9:7.3f} GB",
                  flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["peak", "fit", "probes"])
    ap.add_argument("--model", help="only this model's cases")
    ap.add_argument("--json", metavar="OUT", help="also write the rows as JSON")
    args = ap.parse_args()
    truth = json.loads(GROUND_TRUTH.read_text())
    pick = [c for c in truth["peak"] if not args.model or c["model"] == args.model]
    fit_cases = [c for c in truth["fit"] if not args.model or c["model"] == args.model]
    result = {}
    if args.only in (None, "peak"):
        result["peak"] = peaks(pick)
    if args.only in (None, "fit"):
        print()
        result["fit"] = fits(fit_cases)
    if args.only == "probes":
        result["probes"] = probes(fit_cases)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
