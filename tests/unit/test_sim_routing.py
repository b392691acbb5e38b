"""Balanced routing (lab.measure.sim.facade.routing): a hand-looped mixture of experts picks each
expert's tokens from a one_hot mask; sim sizes them as tokens x top_k / experts and names the
site, and a mask of other provenance is still refused in one line."""

from __future__ import annotations

from .test_sim_placeholders import _note, _profile

SCRIPT = '''\
import torch, torch.nn.functional as F
tokens, experts, top_k = 64, 8, 2
logits = torch.randn(tokens, experts, device="cuda")
chosen = logits.topk(top_k, dim=-1).indices
mask = F.one_hot(chosen, num_classes=experts).permute(2, 1, 0)  # (E, k, N)
for e in range(experts):
    slot, token = torch.where(mask[e])
    assert token.shape == (tokens * top_k // experts,), token.shape
assert torch.nonzero(mask).shape == (tokens * top_k, 3)
'''


def test_a_one_hot_routing_mask_routes_tokens_evenly_and_says_where(tmp_path):
    script = tmp_path / "route.py"
    script.write_text(SCRIPT)
    r = _profile(script)
    assert r.status == "ok", r.error
    note = _note(r, "balanced routing")
    assert "route.py:7 x8" in note and "route.py:9" in note


def test_a_mask_sim_cannot_size_is_still_refused_in_one_line(tmp_path):
    script = tmp_path / "mask.py"
    script.write_text('import torch\nx = torch.randn(64, device="cuda")\n'
                      'idx = torch.where(x > 0)\n')
    r = _profile(script)
    assert r.status == "error"
    assert "mask.py:3" in r.error and "\n" not in r.error.strip()
