"""`memlab profile --mode sim` on unmodified scripts against the H200 ground truth, both halves.

    python bench/profile_vs_h200.py [--only GLOB,...] [--half tune|held_out] [--jobs N]
        [--json OUT.json] [--mode sim|cpu] [--tiny]
    python bench/profile_vs_h200.py --suite zoo [--markdown docs/ACCURACY.md] ...

`--suite zoo`: the practitioner zoo (bench/ground_truth/cases.py zoo_cases, recorded into
assets/ground_truth/zoo_gpu.json on whichever card the device gave): every case runs in sim on
the card its recording names (a case not recorded yet still runs: sim's status alone), and the
tables are per half and per category (bench/ground_truth/zoo_report.py); `--markdown FILE`
writes them into FILE between its zoo-table markers (docs/ACCURACY.md), never by hand.

For every case recorded in assets/ground_truth/profile_h200.json (bench/ground_truth/run_h200.py:
plain scripts, no lab code, a fresh process each) this runs the same command the H200 ran,
from the same folder, as a user would:

    memlab profile --mode sim --gpu h200 --json -- python SCRIPT ARGS

and compares the predicted `max_memory_allocated` (target: within 1 %) and
`max_memory_reserved` (within 3 %, none beyond 5 %) with the H200's. Fit cases: the largest
batch whose sim run fits under `--gpu-memory CAP` against the H200's largest under the same cap
(target: equal, never above). Both halves of assets/ground_truth/split.toml are printed, the
held-out half judged; compiled cases (the H200 ran torch.compile, sim runs eager) and versions/
cases (the H200's own transformers) are shown apart. Which torch and transformers each side ran
is printed with the tables: the H200 on its torch (2.11), sim on this machine's.

`--mode cpu --tiny` checks this harness without the simulator: the cases' tiny arguments, run
for real on this CPU (no allocator numbers, so nothing is judged).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
from cases import SUITES, Case, all_cases, with_batch  # noqa: E402

TRUTH = ROOT / "assets" / "ground_truth" / "profile_h200.json"
GiB = 2**30
ALLOC_TARGET, RESERVED_TARGET, RESERVED_LIMIT = 0.01, 0.03, 0.05


def profile_cmd(case: Case, args: list[str], mode: str, gpu_memory: str | None,
                gpu: str = "h200") -> list[str]:
    cmd = [sys.executable, "-m", "lab", "profile", "--mode", mode, "--json", "--quiet",
           "--no-snapshot"]
    if mode == "sim":
        cmd += ["--gpu", gpu]
    if gpu_memory:
        cmd += ["--gpu-memory", gpu_memory]
    return cmd + ["--", "python", str(ROOT / case.script), *args]


def run_profile(case: Case, args: list[str], mode: str, gpu_memory: str | None = None,
                timeout: float = 1800, gpu: str = "h200") -> dict:
    """One `memlab profile` run, in the case's folder: its RunResult's numbers (or an error)."""
    t0 = time.perf_counter()
    try:
        p = subprocess.run(profile_cmd(case, args, mode, gpu_memory, gpu), cwd=ROOT / case.cwd,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.perf_counter() - t0, 1)}
    seconds = round(time.perf_counter() - t0, 1)
    start = p.stdout.find('{\n "schema"')
    if start < 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1][:200]
        return {"status": "error", "error": f"no result (exit {p.returncode}): {tail}",
                "seconds": seconds}
    r = json.loads(p.stdout[start:])
    a = r.get("allocator") or {}
    return {"status": r["status"], "error": r.get("error"), "seconds": seconds,
            "exit": p.returncode,
            "allocated": a.get("peak_allocated_bytes"), "reserved": a.get("peak_reserved_bytes"),
            "predicted": a.get("predicted"), "torch": r.get("torch_version"),
            "transformers": r.get("transformers_version"), "notes": r.get("notes", [])[:6]}


def fit_sim(case: Case, truth: dict, mode: str) -> dict:
    """The largest batch sim fits under the H200's cap: start at the H200's answer L (L and L+1
    decide equality in two runs), walk down or bisect up from there."""
    cap = f"{truth['cap_gib']}GiB"
    probes: dict[int, str] = {}

    def fits(b: int) -> bool:
        if b not in probes:
            probes[b] = run_profile(case, with_batch(case, b), mode, cap)["status"]
        return probes[b] == "ok"

    h = int(truth.get("largest_batch") or 1)
    if fits(h):
        good, bad = h, h + 1
        while fits(bad) and bad < 8 * h + 8:  # above the H200's answer: find where sim stops
            good, bad = bad, bad * 2
        while bad - good > 1:
            mid = (good + bad) // 2
            good, bad = (mid, bad) if fits(mid) else (good, mid)
    else:
        good = h - 1
        while good >= 1 and not fits(good):
            good -= 1
    return {"largest_batch": max(good, 0), "probes": dict(sorted(probes.items()))}


def pct(pred, truth) -> float | None:
    return None if pred is None or not truth else pred / truth - 1


def fmt_pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.2f}%"


def gb(x) -> str:
    return "—" if x is None else f"{x / 1e9:.3f}"


def table(rows: list[dict], title: str) -> str:
    lines = [f"\n{title}", f"{'case':<34} {'H200 alloc':>10} {'sim':>9} {'Δ':>8} {'✓':<1}  "
             f"{'H200 resv':>9} {'sim':>9} {'Δ':>8} {'✓':<1}  {'s':>5}  note"]
    for r in rows:
        if r["kind"] == "fit":
            mark = "✓" if r["sim_batch"] == r["h200_batch"] else ("✗ above" if r["sim_batch"] >
                                                                  r["h200_batch"] else "✗ below")
            lines.append(f"{r['id']:<34} largest batch under {r['cap_gib']} GiB: H200 "
                         f"{r['h200_batch']}, sim {r['sim_batch']} {mark}  "
                         f"(probes {r['probes']})")
            continue
        ea, er = r["err_alloc"], r["err_reserved"]
        ma = "" if ea is None else ("✓" if abs(ea) <= ALLOC_TARGET else "✗")
        mr = "" if er is None else ("✓" if abs(er) <= RESERVED_TARGET else
                                    ("!" if abs(er) <= RESERVED_LIMIT else "✗"))
        lines.append(f"{r['id']:<34} {gb(r['h200_alloc']):>10} {gb(r['sim_alloc']):>9} "
                     f"{fmt_pct(ea):>8} {ma:<1}  {gb(r['h200_reserved']):>9} "
                     f"{gb(r['sim_reserved']):>9} {fmt_pct(er):>8} {mr:<1}  {r['seconds']:5.0f}  "
                     f"{r['note']}")
    return "\n".join(lines)


def summary(rows: list[dict], half: str) -> str:
    peak = [r for r in rows if r["kind"] != "fit" and r["err_alloc"] is not None
            and r["judged"]]
    fit = [r for r in rows if r["kind"] == "fit"]
    if not peak and not fit:
        return f"{half}: nothing judged"
    a_ok = sum(abs(r["err_alloc"]) <= ALLOC_TARGET for r in peak)
    r_ok = sum(abs(r["err_reserved"]) <= RESERVED_TARGET for r in peak)
    worst = max(peak, key=lambda r: abs(r["err_reserved"]), default=None)
    over = [r["id"] for r in peak if abs(r["err_reserved"]) > RESERVED_LIMIT]
    f_eq = sum(r["sim_batch"] == r["h200_batch"] for r in fit)
    f_above = [r["id"] for r in fit if r["sim_batch"] > r["h200_batch"]]
    return (f"{half}: allocated within 1 % on {a_ok} of {len(peak)}; reserved within 3 % on "
            f"{r_ok} of {len(peak)}" + (f", worst {fmt_pct(worst['err_reserved'])} "
                                        f"({worst['id']})" if worst else "")
            + (f", beyond 5 %: {', '.join(over)}" if over else ", none beyond 5 %")
            + f"; fit equal on {f_eq} of {len(fit)}"
            + (f", ABOVE the H200 on {', '.join(f_above)}" if f_above else ""))


def compare(case: Case, truth: dict, mode: str, tiny: bool) -> dict:
    row = {"id": case.id, "half": truth["half"], "kind": case.kind}
    if case.kind == "fit":
        if tiny:
            r = run_profile(case, case.tiny, mode)
            return {**row, "kind": "peak", **_peak_row(case, truth, r)}
        f = fit_sim(case, truth, mode)
        return {**row, "cap_gib": truth["cap_gib"], "h200_batch": truth.get("largest_batch"),
                "sim_batch": f["largest_batch"], "probes": f["probes"], "seconds": 0}
    r = run_profile(case, case.tiny if tiny else case.args, mode)
    return {**row, **_peak_row(case, truth, r)}


def _peak_row(case: Case, truth: dict, r: dict) -> dict:
    note = "" if r["status"] == "ok" else f"{r['status']}: {(r.get('error') or '')[:70]}"
    judged = case.kind == "hf" or case.kind == "script"
    if "compiled" in case.id:
        note, judged = (note or "H200 compiled, sim eager (not judged)"), False
    if case.kind == "versions":
        note = note or f"H200 transformers {truth.get('transformers')} vs sim {r.get('transformers')}"
        judged = False
    elif truth.get("transformers") and r.get("transformers") and \
            truth["transformers"] != r["transformers"]:
        note = note or f"transformers differ: H200 {truth['transformers']}, sim {r['transformers']}"
    ok = r["status"] == "ok" and truth.get("status") == "ok"
    return {"h200_alloc": truth.get("max_allocated"), "h200_reserved": truth.get("max_reserved"),
            "sim_alloc": r.get("allocated"), "sim_reserved": r.get("reserved"),
            "err_alloc": pct(r.get("allocated"), truth.get("max_allocated")) if ok else None,
            "err_reserved": pct(r.get("reserved"), truth.get("max_reserved")) if ok else None,
            "seconds": r.get("seconds", 0), "note": note, "judged": judged,
            "sim_torch": r.get("torch"), "sim_transformers": r.get("transformers")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", choices=sorted(SUITES), default="profile")
    ap.add_argument("--markdown", type=Path, help="zoo: write the tables into this file")
    ap.add_argument("--only", help="comma-separated globs of case ids")
    ap.add_argument("--half", choices=["tune", "held_out"])
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--truth", type=Path, default=None)
    ap.add_argument("--json", type=Path, help="write every row here")
    ap.add_argument("--mode", default="sim", choices=["sim", "cpu"],
                    help="cpu (with --tiny): check the harness without the simulator")
    ap.add_argument("--tiny", action="store_true", help="the cases' tiny CPU arguments")
    args = ap.parse_args()
    if args.suite == "zoo":
        from zoo_report import main_zoo

        return main_zoo(args, run_profile)
    args.truth = args.truth or TRUTH
    if not args.truth.exists():
        print(f"profile_vs_h200: {args.truth} does not exist: record it on the H200 first "
              "(bench/ground_truth/run_h200.py)", file=sys.stderr)
        return 2
    doc = json.loads(args.truth.read_text())
    cases = [c for c in all_cases() if c.id in doc["cases"]]
    if args.only:
        cases = [c for c in cases if any(fnmatch.fnmatch(c.id, g) for g in args.only.split(","))]
    if args.half:
        cases = [c for c in cases if doc["cases"][c.id]["half"] == args.half]
    missing = [c.script for c in cases if not (ROOT / c.script).exists()]
    if missing:
        print(f"profile_vs_h200: {missing[0]} is missing: run bench/ground_truth/prepare.py "
              "--no-wheels", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(lambda c: compare(c, doc["cases"][c.id], args.mode, args.tiny),
                             cases))
    run = (doc.get("runs") or [{}])[-1]
    sim_t = next((r for r in rows if r.get("sim_torch")), {})
    print(f"H200: {run.get('gpu')}, torch {run.get('torch')}, transformers "
          f"{run.get('transformers_carried')} (carried; the machine's own: "
          f"{run.get('transformers_native')})")
    print(f"sim ({args.mode}{', tiny' if args.tiny else ''}): torch {sim_t.get('sim_torch')}, "
          f"transformers {sim_t.get('sim_transformers')}")
    for half, title in (("tune", "TUNE (the simulator may be tuned on these)"),
                        ("held_out", "HELD OUT (fixed 2026-12-01; judged)"),
                        ("versions", "VERSIONS (the H200's own transformers; not judged)")):
        part = [r for r in rows if r["half"] == half]
        if part:
            print(table(part, title))
            if half != "versions":
                print(summary(part, half))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
