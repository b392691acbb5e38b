"""`memlab profile --mode cuda` and `memlab.track()` on a CUDA GPU (`pytest -m cuda tests/gpu`)."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parents[2]
KNOWN = ROOT / "tests" / "fixtures" / "profile" / "known_footprint.py"
D, H, B = 256, 1024, 64


def test_profile_cuda_script_categories_and_snapshot(tmp_path, capsys):
    from lab.cli import main
    from lab.snapshots import open_summary

    snap = tmp_path / "p.pkl"
    code = main(["profile", "--mode", "cuda", "--json", "--snapshot", str(snap), "--", "python",
                 str(KNOWN), "2", "cuda"])
    out, err = capsys.readouterr()
    assert code == 0, err
    r = json.loads(out)
    cats = r["peak"]["by_category"]
    assert cats["parameters"] == cats["gradients"] == 2 * D * H * 4
    assert cats["inputs"] == B * D * 4
    assert {"forward 0", "backward 0", "step 0"} <= {p["name"] for p in r["phases"]}
    a = r["allocator"]
    assert a["peak_allocated_bytes"] >= r["peak"]["bytes"]
    [s] = open_summary(snap, freeze_gc=False)  # the allocator's own history, memory_viz format
    assert s.peak_bytes == a["peak_allocated_bytes"] or abs(s.peak_bytes - a["peak_allocated_bytes"]) \
        <= 0.01 * a["peak_allocated_bytes"]


def test_track_in_process_on_cuda():
    import memlab

    model = nn.Linear(1024, 1024, bias=False).cuda()
    opt = torch.optim.AdamW(model.parameters())
    with memlab.track(model, opt) as t:
        x = torch.randn(512, 1024, device="cuda")
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    r = t.result
    assert r.mode == "cuda" and r.ok
    assert r.peak.by_category["parameters"] == 1024 * 1024 * 4
    assert r.peak.by_category["optimizer_state"] >= 2 * 1024 * 1024 * 4
    assert r.allocator.peak_allocated_bytes >= t.peak.bytes
