"""What CUDA's kernels return for the ops sim gives CUDA's meta rules (issue 37 item 1).

    python bench/ground_truth/probe_meta_rules.py --out assets/ground_truth/meta_rules_gpu.json

On a CUDA GPU: runs `histc` on integer and float inputs and `_grouped_mm` in bf16 / fp16 / fp32
in each layout transformers' experts use, and records each output's shape, strides and dtype
(or the error the GPU gave), with the torch version and the card. No lab code (the GPU machine
runs it bare); tests/unit/test_sim_meta_rules.py compares every recorded row with
lab/measure/sim/kernels/meta_rules.py once the file is in assets/ground_truth/. On a machine
without CUDA it runs the same calls on the CPU and says so in `device` (nothing to compare).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

# name -> (shape of a, shape of b, offsets or None); the layouts of the meta rules' tests. The
# inputs' rows must be 16-byte multiples (CUDA and the CPU refuse others); "-odd" takes b
# column-major (experts' weights transposed, as transformers passes them), so the output's rows
# (30 elements) are not, and CUDA pads them. Offsets must lie within the split dimension: CUDA
# checks them on the device (a device-side assert, which ends the process's CUDA context)
LAYOUTS = {
    "2d-3d": ((64, 96), (4, 96, 40), [16, 32, 48, 64]),
    "3d-3d": ((4, 16, 96), (4, 96, 40), None),
    "3d-2d": ((4, 16, 64), (64, 64), [16, 32, 48, 64]),  # offsets split b's columns
    "2d-2d": ((40, 64), (64, 24), [16, 32, 48, 64]),
    "2d-3d-odd": ((64, 96), (4, 96, 30), [16, 32, 48, 64]),
}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def _row(fn) -> dict:
    try:
        out = fn()
        if out.is_cuda:  # an asynchronous kernel error belongs to this row, not the next
            torch.cuda.synchronize()
    except Exception as exc:  # the GPU's answer is the record: a refusal is one too
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    return {"shape": list(out.shape), "stride": list(out.stride()),
            "dtype": str(out.dtype).removeprefix("torch.")}


def probe(device: str) -> list[dict]:
    rows = []
    for dtype in (torch.int32, torch.int64, torch.float32):
        x = torch.randint(0, 8, (64,), device=device).to(dtype)
        rows.append({"op": "histc", "input": str(dtype).removeprefix("torch."), "bins": 8,
                     **_row(lambda: torch.histc(x, bins=8, min=0, max=7))})
    for layout, (a_shape, b_shape, offs) in LAYOUTS.items():
        for name, dtype in DTYPES.items():
            a = torch.randn(a_shape, device=device, dtype=dtype)
            b = torch.randn(b_shape, device=device, dtype=dtype)
            if layout.endswith("-odd"):
                b = torch.randn(b_shape[0], b_shape[2], b_shape[1], device=device,
                                dtype=dtype).transpose(-2, -1)
            o = None if offs is None else torch.tensor(offs, device=device, dtype=torch.int32)
            rows.append({"op": "_grouped_mm", "layout": layout, "a": list(a_shape),
                         "b": list(b_shape), "offs": offs, "input": name,
                         **_row(lambda: torch._grouped_mm(a, b, offs=o))})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    record = {"torch": torch.__version__, "device": (torch.cuda.get_device_name()
                                                     if device == "cuda" else "cpu"),
              "rows": probe(device)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    bad = sum("error" in r for r in record["rows"])
    print(f"{len(record['rows'])} rows on {record['device']} (torch {record['torch']}), "
          f"{bad} refused: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
