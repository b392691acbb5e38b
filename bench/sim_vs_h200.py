"""Every lesson variant in sim at seed scale, next to its H200 recording (assets/reference).

    python bench/sim_vs_h200.py [--lesson 08] [--json OUT.json] [--from OUT.json]

Per variant: the H200's tracked peak and sim's, the error, the error of the variant's ratio to
its lesson's baseline, ok/oom status, and sim's predicted allocator numbers against the H200's
`max_memory_allocated` / `max_memory_reserved`. The bars (issue 10): peak within 1 % (3 % with a
named reason), ratio within 2 %, status equal, allocated within 2 %, reserved within 5 %.

Variants run in this process, one after another (measure_request resets everything between
them); `--from` re-prints a table saved with `--json` without running anything. This script may
read the recordings: it judges the simulator, it is not part of it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REFERENCE = ROOT / "assets" / "reference"

# Where the experiment code itself runs differently in sim than on CUDA (the lessons branch owns
# the code; the simulator cannot and should not paper over it). Shown as the reason for a miss.
KNOWN = {
    ("gradient-accumulation", "*"): "experiment: `if not run.simulated` keeps step 0's grads alive on "
                                    "the GPU only (issue 9; the lead re-records 07)",
    ("logits-peak", "fused"): "experiment: refused in sim (liger's Triton kernel is CUDA only)",
    ("low-memory-optimizers", "adamw_8bit_compiled"):
        "experiment: cuda only (torchao's compiled update; in sim it would be adamw_8bit)",
}


def known(lesson: str, variant: str) -> str:
    return KNOWN.get((lesson, variant)) or KNOWN.get((lesson, "*"), "")


def run_sim(lesson_filter: list[str] | None) -> list[dict]:
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    out = []
    for lesson in load_course().lessons:
        if lesson_filter and not any(lesson.key == f or lesson.id == f for f in lesson_filter):
            continue
        for v in lesson.variants:
            t0 = time.perf_counter()
            # the variant's environment is set as the worker sets it (sim's allocator model
            # reads PYTORCH_CUDA_ALLOC_CONF when the run starts: lessons 17 and 23)
            r = measure_request(RunRequest.for_lesson(lesson, v.name, "sim", "seed", timing=False))
            row = {"lesson": lesson.id, "key": lesson.key, "variant": v.name,
                   "status": r.status, "peak": r.peak.bytes, "error": r.error,
                   "seconds": round(time.perf_counter() - t0, 2), "notes": r.notes}
            a = r.allocator
            if a is not None:
                row["allocated"] = a.peak_allocated_bytes
                row["reserved"] = a.peak_reserved_bytes
            out.append(row)
            print(f"  {lesson.key} {v.name}: {r.status} {r.peak.bytes:,} B in {row['seconds']} s",
                  file=sys.stderr)
    return out


def reference(lesson_id: str, variant: str) -> dict | None:
    path = REFERENCE / lesson_id / f"{variant}.json"
    return json.loads(path.read_text()) if path.is_file() else None


def pct(a: float | None, b: float | None) -> float | None:
    return None if not a or not b else 100.0 * (a - b) / b


def fmt(x: float | None, width: int = 7) -> str:
    return f"{x:+{width}.2f}" if x is not None else " " * (width - 1) + "-"


def table(rows: list[dict]) -> None:
    base = {}
    for r in rows:
        ref = reference(r["lesson"], r["variant"])
        r["ref"] = ref
        if r["variant"] == "baseline":
            base[r["lesson"]] = r
    head = (f"{'variant':34} {'H200 peak':>15} {'sim peak':>15} {'err%':>7} {'ratio%':>7} "
            f"{'status':>9} {'alloc%':>7} {'resv%':>7} {'s':>6}")
    print(head)
    print("-" * len(head))
    worst = {"peak": 0.0, "ratio": 0.0, "alloc": 0.0, "resv": 0.0}
    counts = {"1%": 0, "3%": 0, "status": 0, "alloc": 0, "resv": 0, "n": 0}
    for r in rows:
        ref = r["ref"]
        if ref is None:
            print(f"{r['key'] + ' ' + r['variant']:34} (no recording)")
            continue
        counts["n"] += 1
        hp = ref["peak"]["bytes"]
        e = pct(r["peak"], hp)
        b, bref = base.get(r["lesson"]), reference(r["lesson"], "baseline")
        ratio = None
        if b and bref and r["variant"] != "baseline" and b["peak"] and r["peak"]:
            ratio = pct(r["peak"] / b["peak"], ref["peak"]["bytes"] / bref["peak"]["bytes"])
        alloc = ref.get("allocator") or {}
        ea = pct(r.get("allocated"), alloc.get("peak_allocated_bytes"))
        er = pct(r.get("reserved"), alloc.get("peak_reserved_bytes"))
        st = f"{r['status']}/{ref['status']}"
        counts["1%"] += e is not None and abs(e) <= 1
        counts["3%"] += e is not None and abs(e) <= 3
        counts["status"] += r["status"] == ref["status"]
        counts["alloc"] += ea is not None and abs(ea) <= 2
        counts["resv"] += er is not None and abs(er) <= 5
        for k, v in (("peak", e), ("ratio", ratio), ("alloc", ea), ("resv", er)):
            if v is not None and abs(v) > abs(worst[k]):
                worst[k] = v
        why = known(r["lesson"], r["variant"])
        miss = (r["status"] != ref["status"] or any(v is not None and abs(v) > bar for v, bar in
                                                      ((e, 1), (ratio, 2), (ea, 2), (er, 5))))
        print(f"{r['key'] + ' ' + r['variant']:34} {hp:>15,} {r['peak']:>15,} {fmt(e)} {fmt(ratio)} "
              f"{st:>9} {fmt(ea)} {fmt(er)} {r.get('seconds', 0):>6.1f}"
              + (f"  <- {why}" if miss and why else ("  <- MISS" if miss else "")))
    n = counts["n"]
    print(f"\n{n} variants: peak within 1 %: {counts['1%']}, within 3 %: {counts['3%']}; status equal: "
          f"{counts['status']}; allocated within 2 %: {counts['alloc']}; reserved within 5 %: "
          f"{counts['resv']}")
    print("worst: " + ", ".join(f"{k} {v:+.2f} %" for k, v in worst.items()))
    print(f"sim seconds in all: {sum(r.get('seconds', 0) for r in rows):.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lesson", action="append", help="only this lesson (key or id; repeatable)")
    ap.add_argument("--json", help="save the sim rows here")
    ap.add_argument("--from", dest="src", help="print the table of rows saved with --json")
    args = ap.parse_args()
    if args.src:
        rows = json.loads(Path(args.src).read_text())
    else:
        rows = run_sim(args.lesson)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=1))
    table(rows)


if __name__ == "__main__":
    main()
