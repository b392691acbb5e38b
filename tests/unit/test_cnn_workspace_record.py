"""docs/ACCURACY.md's table of why the CNN cases miss cites the GPU's recordings
(assets/ground_truth/cnn_workspace_gpu.json, bench/ground_truth/conv_workspace.py), not typed
numbers: every GPU figure in it is one of the recorded traces'."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "assets" / "ground_truth" / "cnn_workspace_gpu.json"
CASES = {"cnn/resnet50-fp32": "resnet.py --depth 50 --batch 128",
         "cnn/resnet101-fp32-cl": "resnet.py --depth 101 --batch 64 --channels-last",
         "cnn/unet-bf16": "unet.py --batch 16 --image 512 --bf16"}


def test_the_cnn_table_cites_the_recorded_traces():
    traces = json.loads(RECORD.read_text())["traces"]
    doc = (ROOT / "docs" / "ACCURACY.md").read_text()
    for case, args in CASES.items():
        row = next(line for line in doc.splitlines() if line.startswith(f"| {case} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        as_written, off, _, reserved_off, _ = (float(re.match(r"[\d.]+", c).group())
                                               for c in cells[1:])
        got = {t["benchmark"]: t for t in traces if t["script"].endswith(args)}
        assert round(got["script"]["max_allocated"] / 1e9, 3) == as_written, case
        assert round(got["off"]["max_allocated"] / 1e9, 3) == off, case
        assert round(got["off"]["max_reserved"] / 1e9, 3) == reserved_off, case
