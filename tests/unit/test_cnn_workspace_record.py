"""docs/ACCURACY.md's end-to-end table of the CNN cases cites the GPU's recordings
(assets/ground_truth/zoo_gpu.json for the scripts as written; cnn_workspace_gpu.json's traces,
bench/ground_truth/conv_workspace.py, for cudnn.benchmark pinned off), not typed numbers: every
GPU figure in it is one of the recorded ones. Its sim figures are printed by
`python bench/conv_workspace_rules.py --cases`."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GT = ROOT / "assets" / "ground_truth"
CASES = {"cnn/resnet50-fp32": "resnet.py --depth 50 --batch 128",
         "cnn/resnet50-bf16-cl": None,  # no pinned-off trace was recorded for it
         "cnn/resnet101-fp32-cl": "resnet.py --depth 101 --batch 64 --channels-last",
         "cnn/unet-bf16": "unet.py --batch 16 --image 512 --bf16"}


def _numbers(cell: str) -> list[float]:
    return [float(n) for n in re.findall(r"\d+\.\d{3}", cell)]


def test_the_cnn_table_cites_the_recorded_runs():
    zoo = json.loads((GT / "zoo_gpu.json").read_text())["cases"]
    traces = json.loads((GT / "cnn_workspace_gpu.json").read_text())["traces"]
    doc = (ROOT / "docs" / "ACCURACY.md").read_text()
    for case, args in CASES.items():
        row = next(line for line in doc.splitlines()  # not the zoo table's "(H100)" rows
                   if line.startswith((f"| {case} (tune) |", f"| {case} (held out) |")))
        cells = [c.strip() for c in row.strip("|").split("|")]
        gpu = zoo[f"zoo/{case}"]
        assert _numbers(cells[1]) == [round(gpu["max_allocated"] / 1e9, 3)], case
        assert _numbers(cells[3]) == [round(gpu["max_reserved"] / 1e9, 3)], case
        if args is None:
            assert not cells[5], case
            continue
        off = next(t for t in traces if t["benchmark"] == "off" and t["script"].endswith(args))
        assert _numbers(cells[5]) == [round(off["max_allocated"] / 1e9, 3),
                                      round(off["max_reserved"] / 1e9, 3)], case
