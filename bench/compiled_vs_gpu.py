"""sim's estimated compiled peak against torch.compile runs recorded on a GPU (issue 41's gate).

    python bench/compiled_vs_gpu.py [--only GLOB,...] [--jobs N] [--json OUT.json] [--write]
    python bench/compiled_vs_gpu.py --tiny       the harness on the cases' tiny CPU sizes

For every pair of the `compiled` suite (bench/ground_truth/cases.py `compiled_cases`, recorded by
`run_h200.py --suite compiled` into assets/ground_truth/compiled_gpu.json) this runs the compiled
version's command as a user would, on the card its recording names:

    MEMLAB_COMPILED_ESTIMATE=1 memlab profile --mode sim --gpu CARD --json -- python SCRIPT ARGS

which gives, from one command, sim's eager prediction (the result itself) and its estimated
compiled peak (metrics `estimated_compiled_peak_*`). Both are compared with the GPU's compiled
run's `max_memory_allocated`; the eager twin's recording is shown beside them (what compiling
changed on the GPU). The gate (split.toml's [[added]] of 2026-12-07, fixed before any number):
every held-out pair within GATE_ERROR (10 %) of the GPU and closer than the eager prediction.
`--write` writes the summary to lab.profile.compiled_estimate.GATE, which is what makes
`memlab profile --mode sim` show the estimate (with these errors) or keep it off: only this
bench writes that file, never a hand.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))
from cases import COMPILED_RESULTS, Case, compiled_cases  # noqa: E402
from profile_vs_h200 import run_profile  # noqa: E402
from zoo_report import card_key  # noqa: E402

from lab.profile.compiled_estimate import ENV, GATE, GATE_ERROR  # noqa: E402

GB = 1e9


def err(pred, truth) -> float | None:
    return None if not pred or not truth else pred / truth - 1


def tiny_args(case: Case) -> list[str]:
    """The tiny sizes on the script's default device (CUDA, which sim predicts) with the
    compiled version's own flags (the suite's tiny arguments are the eager twin's on the CPU:
    run_h200.py --dry-run does not compile)."""
    args, skip = [], False
    for a in case.tiny:
        if skip:
            skip = False
            continue
        if a == "--compile" and not case.info["own"] == ["--compile"]:
            skip = True  # --compile off
            continue
        if a.startswith(("--compile=", "--device=")) or a == "--compile":
            continue
        if a == "--device":  # sim predicts the script's CUDA run
            skip = True
            continue
        args.append(a)
    return args + case.info["own"]


def compare(case: Case, truth: dict, eager_truth: dict, tiny: bool) -> dict:
    os.environ[ENV] = "1"  # the estimate whatever the gate says (this bench is what sets it)
    card = card_key(truth.get("gpu")) if truth else "h200"
    r = run_profile(case, tiny_args(case) if tiny else case.args, "sim", gpu=card, timeout=3600)
    m = r.get("metrics") or {}
    est = m.get("estimated_compiled_peak_allocated_bytes")
    gpu = truth.get("max_allocated")
    return {"pair": case.info["pair"], "half": truth.get("half"), "card": card,
            "gpu_name": truth.get("gpu"), "status": r["status"], "error": r.get("error"),
            "gpu_compiled": gpu, "gpu_eager": eager_truth.get("max_allocated"),
            "sim_eager": r.get("allocated"), "sim_estimate": est,
            "err_estimate": err(est, gpu), "err_eager": err(r.get("allocated"), gpu),
            "graphs": m.get("compiled_dynamo_graphs"), "seconds": r.get("seconds")}


def gate(rows: list[dict]) -> dict:
    """The summary GATE holds: shipped only when every held-out pair is within GATE_ERROR and
    closer than the eager prediction."""
    judged = [r for r in rows if r["err_estimate"] is not None]
    held = [r for r in judged if r["half"] == "held_out"]
    all_held = [r for r in rows if r["half"] == "held_out"]
    worst = max(held, key=lambda r: abs(r["err_estimate"]), default=None)
    worst_eager = max(held, key=lambda r: abs(r["err_eager"] or 0), default=None)
    shipped = bool(held) and len(held) == len(all_held) and all(
        abs(r["err_estimate"]) <= GATE_ERROR and abs(r["err_estimate"]) < abs(r["err_eager"] or 0)
        for r in held)
    return {"shipped": shipped, "rule": f"every held-out pair within {GATE_ERROR:.0%} of the "
            "GPU's max_memory_allocated and closer than sim's eager prediction",
            "cases": len(judged), "held_out": len(held), "held_out_recorded": len(all_held),
            "gpu": ", ".join(sorted({r["gpu_name"] for r in judged if r["gpu_name"]})),
            "held_out_worst": worst["err_estimate"] if worst else None,
            "eager_held_out_worst": worst_eager["err_eager"] if worst_eager else None,
            "mean_abs": (sum(abs(r["err_estimate"]) for r in judged) / len(judged)
                         if judged else None),
            "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "rows": rows}


def table(rows: list[dict]) -> str:
    def gb(x):
        return f"{x / GB:7.2f}" if x else "      -"

    def pc(x):
        return f"{100 * x:+6.1f} %" if x is not None else "      -"

    out = [f"{'pair':<22} {'half':<8} {'GPU eager':>9} {'GPU comp':>9} {'sim eager':>9} "
           f"{'estimate':>9} {'est err':>9} {'eager err':>9}  graphs  status"]
    for r in rows:
        out.append(f"{r['pair']:<22} {r['half'] or '-':<8} {gb(r['gpu_eager']):>9} "
                   f"{gb(r['gpu_compiled']):>9} {gb(r['sim_eager']):>9} {gb(r['sim_estimate']):>9} "
                   f"{pc(r['err_estimate']):>9} {pc(r['err_eager']):>9}  {r['graphs'] or '-':>6}"
                   f"  {r['status']}{': ' + r['error'][:60] if r.get('error') else ''}")
    return "\n".join(out) + "\n(GB = 1e9 bytes; errors against the GPU's compiled run)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated globs of pair names")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--truth", type=Path, default=COMPILED_RESULTS)
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--tiny", action="store_true", help="the tiny CPU sizes: the harness only")
    ap.add_argument("--write", action="store_true", help=f"write the gate to {GATE}")
    args = ap.parse_args()
    doc = json.loads(args.truth.read_text()) if args.truth.exists() else {"cases": {}}
    if not doc["cases"] and not args.tiny:
        print(f"compiled_vs_gpu: {args.truth} has no recording: run "
              "bench/ground_truth/run_h200.py --suite compiled on a GPU first", file=sys.stderr)
        return 2
    cases = [c for c in compiled_cases() if c.info["version"] == "compiled"]
    if args.only:
        cases = [c for c in cases if any(fnmatch.fnmatch(c.info["pair"], g)
                                         for g in args.only.split(","))]
    if not args.tiny:
        cases = [c for c in cases if doc["cases"].get(c.id, {}).get("status") == "ok"]

    def one(c: Case) -> dict:
        truth = doc["cases"].get(c.id, {})
        eager = doc["cases"].get(c.id.replace("/compiled", "/eager"), {})
        return compare(c, truth, eager, args.tiny)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(one, cases))
    print(table(rows))
    summary = gate(rows)
    print(f"gate: {'MET' if summary['shipped'] else 'not met'} ({summary['rule']}); held-out "
          f"{summary['held_out']}/{summary['held_out_recorded']} judged")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.write:
        if args.tiny:
            print("compiled_vs_gpu: --tiny runs judge nothing: the gate is not written",
                  file=sys.stderr)
            return 2
        GATE.write_text(json.dumps(summary, indent=1) + "\n")
        print(f"compiled_vs_gpu: wrote {GATE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
