"""The suite's time on this machine: the quick tier and the whole suite, as CI runs them.

    python bench/suite_time.py [--quick-only] [--top 15]

Runs `pytest -q -m "not slow"`, then `pytest -q` (every core, as in CI), and prints each one's
wall time against its budget (quick tier 100 s, whole suite 13 min on 2 cores: issue 33), the
load average before and after (a loaded box is slower: say it beside the figures), and the
slowest tests by wall and by CPU time (tests/budget.py writes them: MEMLAB_TEST_TIMES). Numbers
only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUDGETS = {"quick tier": 100.0, "whole suite": 13 * 60.0}


def run(name: str, args: list[str], top: int) -> None:
    with tempfile.TemporaryDirectory(prefix="memlab-suite-") as tmp:
        times = Path(tmp) / "times.jsonl"
        env = {**os.environ, "MEMLAB_TEST_TIMES": str(times)}
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *args], cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        tail = [line for line in proc.stdout.splitlines() if line.strip()][-1:]
        rows = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
    budget = BUDGETS[name]
    print(f"\n{name}: {wall:.1f} s wall ({100 * wall / budget:.0f} % of its {budget:.0f} s budget), "
          f"{sum(r['cpu_s'] for r in rows):.0f} CPU-s in the tests' own processes; load "
          f"{load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"exit {proc.returncode}: {tail[0] if tail else ''}")
    for key, unit in (("wall_s", "s"), ("cpu_s", "CPU-s")):
        print(f"  slowest by {unit}:")
        for r in sorted(rows, key=lambda r: -r[key])[:top]:
            print(f"    {r[key]:7.2f} {unit:<5} {'slow ' if r['slow'] else '     '}{r['test']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick-only", action="store_true", help="only the quick tier")
    ap.add_argument("--top", type=int, default=15, help="how many of the slowest tests to list")
    args = ap.parse_args()
    run("quick tier", ["-m", "not slow"], args.top)
    if not args.quick_only:
        run("whole suite", [], args.top)


if __name__ == "__main__":
    main()
