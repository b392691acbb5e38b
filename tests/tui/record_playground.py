"""Record the playground fixtures: `PYTHONPATH=. python tests/tui/record_playground.py`.

Real worker output (JSON lines) for the `mlp` workload in cpu mode at small sizes, one file
per combination: tests/fixtures/runs/playground/<combo>.cpu-small.jsonl. The playground
tests replay them (`PlaygroundReplay` in test_playground.py picks the file by combination).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "runs" / "playground"
COMBOS = ["baseline", "ckpt"]


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from lab.tui.screens.playground_data import labels, make_plan

    plan = make_plan("mlp", "cpu", {}, COMBOS)
    OUT.mkdir(parents=True, exist_ok=True)
    for label, req in zip(labels(plan), plan.requests()):
        proc = subprocess.run([sys.executable, "-m", "lab.runner.worker",
                               json.dumps(req.to_json_dict())],
                              cwd=ROOT, capture_output=True, text=True, check=True)
        path = OUT / f"{label}.cpu-small.jsonl"
        path.write_text(proc.stdout, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(proc.stdout.splitlines())} lines")


if __name__ == "__main__":
    main()
