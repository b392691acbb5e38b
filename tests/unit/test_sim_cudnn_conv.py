"""Sim's cuDNN workspace rules (lab.measure.sim.kernels.cudnn_conv) against the H100's
measured convolutions, and the search's block, which the device's free memory bounds.

The rules' constants were fitted on the tune half's rows of
assets/ground_truth/cnn_workspace_gpu.json; the held-out rows here judge them
(bench/conv_workspace_rules.py prints every row)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from lab.measure.sim.allocator.replay import Bounded, Replay
from lab.measure.sim.kernels.cudnn_conv import (FORWARD, GRAD_INPUT, GRAD_WEIGHT, Convolution,
                                                calls, plan_workspace, search_workspace)

ROOT = Path(__file__).resolve().parents[2]
MiB = 2**20
sys.path.insert(0, str(ROOT / "bench"))
import conv_workspace_rules  # noqa: E402


def _rows() -> list[dict]:
    return json.loads((ROOT / "assets/ground_truth/cnn_workspace_gpu.json").read_text())[
        "convolutions"]


def _conv(row: dict, direction: str) -> Convolution:
    """The row's convolution in `direction`, as sim's `calls` reads it from tensors of its shapes
    (bench/conv_workspace_rules.py)."""
    return dict(conv_workspace_rules.convolutions(row))[direction]


def _row(case: str, x: list, w0: int, stride: int) -> dict:
    return next(r for r in _rows() if r["case"] == case and r["x"] == x and r["w"][0] == w0
                and r["stride"][0] == stride and r["kind"] == "conv2d")


@pytest.mark.parametrize("case, x, k, stride", [
    ("cnn/resnet50-fp32", [128, 512, 14, 14], 512, 2),  # tune: the ResNet-50's peak, 5.8 GB
    ("cnn/resnet101-fp32-cl", [64, 512, 14, 14], 512, 2),  # held out: other batch, NHWC
    ("cnn/resnet101-fp32-cl", [64, 256, 28, 28], 256, 2),
    ("cnn/resnet101-fp32-cl", [64, 512, 7, 7], 512, 1),  # FFT tiling
])
def test_the_largest_fp32_searches_match_the_h100(case, x, k, stride):
    row = _row(case, x, k, stride)
    measured = row["above_tensors"]["grad_input/benchmark/first"]
    assert search_workspace(_conv(row, GRAD_INPUT)) == pytest.approx(measured, rel=0.03)


def test_a_channels_first_plan_converts_its_tensors_and_a_channels_last_one_does_not():
    nchw = _row("cnn/unet-bf16", [16, 128, 512, 512], 64, 1)  # held out: 1.5 GB per call
    for direction in (FORWARD, GRAD_INPUT):
        measured = nchw["above_tensors"][f"{direction}/heuristic/first"]
        assert plan_workspace(_conv(nchw, direction)) == pytest.approx(measured, rel=0.01)
    nhwc = _row("cnn/resnet50-bf16-cl", [128, 64, 56, 56], 64, 1)
    assert plan_workspace(_conv(nhwc, FORWARD)) == 0
    pointwise = _row("cnn/resnet50-fp32", [128, 64, 56, 56], 256, 1)  # 1x1: a plain GEMM
    assert pointwise["above_tensors"]["forward/heuristic/first"] < MiB
    assert plan_workspace(_conv(pointwise, FORWARD)) == 0
    # bf16 has no FFT candidates: a channels-last grad-weight's search is its plan's partial sums
    assert search_workspace(_conv(nhwc, GRAD_WEIGHT)) == plan_workspace(_conv(nhwc, GRAD_WEIGHT))
    assert 0 < search_workspace(_conv(nhwc, GRAD_WEIGHT)) <= 8 * MiB


@pytest.mark.parametrize("case, x, k, rel", [
    ("cnn/unet-bf16", [16, 128, 512, 512], 64, 0.06),  # held out: split-K in bf16, NCHW
    ("cnn/resnet101-fp32-cl", [64, 128, 28, 28], 128, 0.01),  # held out: fp32, channels-last
    ("cnn/resnet50-fp32", [128, 64, 56, 56], 256, 0.01),  # tune: pointwise, one per image
])
def test_a_grad_weight_plan_takes_partial_sums_beside_the_grad_inputs_workspace(case, x, k, rel):
    # what makes the grad-weight's workspace larger than the grad-input's freed just before it,
    # and so decides whether it reuses that block (docs/ACCURACY.md: the UNet's reserved memory)
    row = _row(case, x, k, 1)
    above = row["above_tensors"]
    measured = above["grad_weight/heuristic/first"] - above["grad_input/heuristic/first"]
    layout_gap = plan_workspace(_conv(row, GRAD_WEIGHT)) - plan_workspace(_conv(row, GRAD_INPUT))
    assert layout_gap == pytest.approx(measured, rel=rel, abs=64 * 1024)
    assert layout_gap > 0


def test_calls_reads_aten_convolutions_and_says_what_it_does_not_cover():
    x = torch.empty(2, 8, 10, 10)
    w = torch.empty(16, 8, 3, 3)
    out = torch.empty(2, 16, 8, 8)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    (conv,), why = calls(torch.ops.aten.convolution.default, args, {}, out)
    assert why is None and (conv.n, conv.c, conv.k, conv.h, conv.kh) == (2, 8, 16, 10, 3)
    assert conv.x_bytes == x.nbytes and conv.out_bytes == out.nbytes and not conv.channels_last
    backward = (out, x, w, [16], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [False, True, True])
    found, _ = calls(torch.ops.aten.convolution_backward.default, backward, {}, None)
    assert [c.direction for c in found] == [GRAD_WEIGHT]  # the input needs no gradient
    depthwise = (x, torch.empty(8, 1, 3, 3), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 8)
    assert calls(torch.ops.aten.convolution.default, depthwise, {}, out) == (
        [], "grouped and depthwise convolutions")


def test_the_search_block_is_bounded_by_free_memory_and_never_fails():
    r = Replay(cap=1024 * MiB, total=80 * 2**30)
    r.alloc("weights", 700 * MiB)
    r.alloc(Bounded("search"), 5000 * MiB)  # more than the card has: bounded, not an OOM
    assert r.result.oom is None
    assert 0 < r.model.stats.allocated - 700 * MiB <= 324 * MiB
    r.free(Bounded("search"))
    with pytest.raises(torch.OutOfMemoryError):  # an ordinary request of that size fails
        r.alloc("activations", 5000 * MiB)
