"""The same lesson variants recorded on two cards: does the memory change with the card?

    python bench/card_vs_card.py DIR [--against assets/reference] [--summary OUT.json]

DIR holds recordings made by `memlab run --mode cuda --scale seed --save DIR` (the layout of
assets/reference/) on another card than the H200's. Prints, per variant, every allocator counter
that differs from the H200 recording of the same variant (tracked peak, max allocated / reserved,
end allocated / reserved, retries, OOMs; NVML's used bytes, which hold the CUDA context, are
printed as a difference: they depend on the card's driver and libraries). `--summary` writes
what the comparison needs, and nothing else, to a small JSON (timelines and step times left out):
tests/unit/test_gpu_rows.py reads it to keep `lab.measure.sim.gpus`' claims about that card true.

Made once from an H100 80GB HBM3 run of bench/h200_round.sh (the device tool gave an H100 where
an H200 was asked for): assets/ground_truth/h100_lessons.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTERS = ("peak_allocated_bytes", "peak_reserved_bytes", "end_allocated_bytes",
            "end_reserved_bytes", "num_alloc_retries", "num_ooms")


def row(d: dict) -> dict:
    a = d.get("allocator") or {}
    return {"status": d["status"], "tracked_peak_bytes": d["peak"]["bytes"],
            **{k: a.get(k) for k in COUNTERS}, "nvml_used_bytes": a.get("nvml_used_bytes")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--against", type=Path, default=ROOT / "assets" / "reference")
    ap.add_argument("--summary", type=Path)
    args = ap.parse_args()
    files = sorted(args.dir.glob("*/*.json"))
    if not files:
        print(f"card_vs_card: no recordings under {args.dir}", file=sys.stderr)
        return 2
    summary = {"device": None, "total_bytes": None, "versions": None, "variants": {}}
    differ = 0
    for f in files:
        d = json.loads(f.read_text())
        ref = json.loads((args.against / f.parent.name / f.name).read_text())
        summary["device"] = d["device"]["name"]
        summary["total_bytes"] = d["device"]["total_bytes"]
        summary["versions"] = {k: d["versions"].get(k) for k in ("torch", "transformers")}
        mine, theirs = row(d), row(ref)
        summary["variants"][f"{f.parent.name}/{f.stem}"] = mine
        moved = [k for k in mine if k != "nvml_used_bytes" and mine[k] != theirs[k]]
        differ += bool(moved)
        nvml = (mine["nvml_used_bytes"] or 0) - (theirs["nvml_used_bytes"] or 0)
        print(f"{f.parent.name:24} {f.stem:26} "
              + (", ".join(f"{k} {mine[k]} vs {theirs[k]}" for k in moved) or "memory equal")
              + f"   NVML used {nvml:+,} B")
    print(f"{len(files)} variants on {summary['device']} ({summary['versions']}): "
          f"{differ} differ from {ref['device']['name']} in a counter other than NVML's")
    if args.summary:
        args.summary.write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
