"""CUDA's meta rules for ops whose meta kernel answers as the CPU would
(lab.measure.sim.kernels.meta_rules): each kernel's shape and dtype against the real CPU kernel
where the CPU runs the op, CUDA's own rule where it does not (histc on integers, _grouped_mm
outside bf16), and the meta device's own kernels back once sim ends."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from lab.measure.sim.kernels.meta_rules import CudaMetaRules, grouped_mm, histc

ROOT = Path(__file__).resolve().parents[2]


def _meta(t: torch.Tensor, dtype=None) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=dtype or t.dtype, device="meta")


def test_histc_takes_the_cpu_kernels_shape_and_integers_as_cuda_does():
    x = torch.randn(100)
    real = torch.histc(x, bins=7)
    out = histc(_meta(x), bins=7)
    assert (out.shape, out.dtype) == (real.shape, real.dtype)
    # routing indices: the CPU refuses them, CUDA counts them in their own dtype
    ids = torch.randint(0, 8, (64,), dtype=torch.int32)
    with pytest.raises(RuntimeError, match="histogram_cpu"):
        torch.histc(ids, bins=8, min=0, max=7)
    out = histc(_meta(ids), bins=8, min=0, max=7)
    assert (out.shape, out.dtype) == ((8,), torch.int32)


OFFS = torch.tensor([16, 32, 48, 64], dtype=torch.int32)
LAYOUTS = {  # transformers' experts: tokens x hidden against experts x hidden x out
    "2d-3d": ((64, 96), (4, 96, 40), OFFS),
    "3d-3d": ((4, 16, 96), (4, 96, 40), None),
    "3d-2d": ((4, 16, 64), (64, 64), OFFS),  # the offsets split b's 64 columns
    "2d-2d": ((40, 64), (64, 24), OFFS),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_grouped_mm_has_the_cpu_kernels_shape_in_each_layout(layout):
    a_shape, b_shape, offs = LAYOUTS[layout]
    a, b = torch.randn(a_shape, dtype=torch.bfloat16), torch.randn(b_shape, dtype=torch.bfloat16)
    real = torch._grouped_mm(a, b, offs=offs)
    out = grouped_mm(_meta(a), _meta(b), None if offs is None else _meta(offs))
    assert (out.shape, out.dtype) == (real.shape, real.dtype)


def test_grouped_mm_takes_fp32_and_pads_rows_to_16_bytes_as_cuda_does():
    a, b = torch.empty(64, 100, device="meta"), torch.empty(4, 100, 30, device="meta")
    out = grouped_mm(a, b, _meta(OFFS))
    # create_grouped_gemm_output_tensor: a 30-float row is padded to 32 (128 bytes)
    assert (out.shape, out.stride(), out.dtype) == ((64, 30), (32, 1), torch.float32)
    assert grouped_mm(a, b, _meta(OFFS), out_dtype=torch.bfloat16).stride() == (32, 1)


def test_installed_while_sim_runs_and_the_stock_rule_back_after():
    a, b = torch.empty(64, 96, device="meta"), torch.empty(4, 96, 40, device="meta")
    rules = CudaMetaRules()
    rules.install()
    try:
        # the fake mode runs an op's Meta kernel: meta tensors reach the same one
        assert torch._grouped_mm(a, b, offs=_meta(OFFS)).dtype == torch.float32
    finally:
        rules.uninstall()
    with pytest.raises(RuntimeError, match="BF16"):
        torch._grouped_mm(a, b, offs=_meta(OFFS))


# ---- against recorded kernels: this CPU's, live; the GPU's, once recorded ----------------------
sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
import probe_meta_rules  # noqa: E402

GPU_RECORD = ROOT / "assets" / "ground_truth" / "meta_rules_gpu.json"


def _rule(row: dict) -> dict:
    """What sim's meta rule answers for a probe row."""
    if row["op"] == "histc":
        out = histc(torch.empty(64, device="meta", dtype=getattr(torch, row["input"])),
                    bins=row["bins"])
    else:
        dtype = probe_meta_rules.DTYPES[row["input"]]
        b = torch.empty(row["b"], device="meta", dtype=dtype)
        if row["layout"].endswith("-odd"):
            b = torch.empty(row["b"][0], row["b"][2], row["b"][1], device="meta",
                            dtype=dtype).transpose(-2, -1)
        offs = None if row["offs"] is None else torch.empty(len(row["offs"]), device="meta",
                                                            dtype=torch.int32)
        out = grouped_mm(torch.empty(row["a"], device="meta", dtype=dtype), b, offs)
    return {"shape": list(out.shape), "stride": list(out.stride()),
            "dtype": str(out.dtype).removeprefix("torch.")}


def _agrees(rows: list[dict]) -> list[str]:
    keys = ("shape", "stride", "dtype")
    return [f"{r}: sim {_rule(r)}" for r in rows
            if "error" not in r and {k: r[k] for k in keys} != _rule(r)]


def test_every_rule_answers_what_this_cpus_kernels_return():
    rows = probe_meta_rules.probe("cpu")
    assert len([r for r in rows if "error" not in r]) >= 16  # all but histc on integers
    assert _agrees(rows) == []


@pytest.mark.skipif(not GPU_RECORD.exists(), reason="the GPU's kernels not recorded yet "
                    "(bench/ground_truth/probe_meta_rules.py on the device)")
def test_every_rule_answers_what_the_gpus_kernels_returned():
    record = json.loads(GPU_RECORD.read_text())
    assert record["device"] != "cpu"
    refused = [r for r in record["rows"] if "error" in r]
    assert refused == [], f"CUDA refused what sim takes ({record['device']}, torch " \
                          f"{record['torch']}): {refused}"
    assert _agrees(record["rows"]) == []
