"""Combinations, the optimizer factory, the workload registry and phases (the fit: test_fit.py)."""

from __future__ import annotations

import pytest
import torch

from lab.workloads import (TOKENS, ComboError, TrainConfig, all_workloads, get_workload,
                           optimizer_spec, parse_combo, parse_combos, tokens_help)
from lab.workloads.phases import parse_phase, phase


# ---- combinations --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, label", [
    ("", "baseline"), ("baseline", "baseline"), ("ckpt+bf16", "bf16+ckpt"),
    ("accum4+sgd+fused", "accum4+sgd+fused"), ("accum2, fp16", "fp16+accum2"),
    ("zero_grads", "zero_grads"), ("bf16+eval", "eval+bf16"), ("adamw", "baseline"),
    ("foreach", "baseline"), ("momentum+forloop", "momentum+forloop"),
    ("ckpt+pure-bf16+adam", "pure-bf16+ckpt+adam"),
])
def test_combo_labels_are_canonical(text, label):
    assert parse_combo(text).label == label
    assert parse_combo(label) == parse_combo(text)  # the label parses back to the same thing


@pytest.mark.parametrize("text, expect", [
    ("bf16+fp16", "both choose the precision"), ("warp-drive", "unknown token"),
    ("eval+ckpt", "eval runs"), ("accum0", "1..1024"), ("sgd+adam", "both choose the optimizer"),
    ("fused+forloop", "both choose the impl"), ("pure-bf16+bf16", "both choose"),
    ("checkpoint", "unknown token"),  # one spelling per token
])
def test_bad_combos_are_one_line(text, expect):
    with pytest.raises(ComboError, match=expect) as info:
        parse_combo(text)
    assert "\n" not in str(info.value)


def test_duplicate_combos_refused():
    with pytest.raises(ComboError, match="twice"):
        parse_combos(["bf16+ckpt", "ckpt+bf16"])


@pytest.mark.parametrize("token", [t.name for t in TOKENS])
def test_every_token_parses_and_is_in_the_help(token):
    text = {"accumN": "accum4", "offload": "fsdp+offload"}.get(token, token)  # offload: fsdp's
    cfg = parse_combo(text)
    assert parse_combo(cfg.label) == cfg
    assert f"  {token} " in tokens_help()


def test_baseline_is_pytorchs_cuda_default():
    assert TrainConfig() == parse_combo("baseline") == parse_combo("adamw+foreach")
    spec = optimizer_spec(TrainConfig())
    assert (spec.cls, spec.foreach, spec.fused) == ("AdamW", True, None)  # forced, cpu/sim too


# ---- the optimizer factory -------------------------------------------------------------------------
@pytest.mark.parametrize("text, cls, momentum, state_bytes", [
    ("baseline", "AdamW", None, 8), ("adamw", "AdamW", None, 8), ("adam", "Adam", None, 8),
    ("sgd", "SGD", 0.0, 0), ("momentum", "SGD", 0.9, 4), ("pure-bf16", "AdamW", None, 4),
    ("pure-bf16+momentum", "SGD", 0.9, 2), ("fused", "AdamW", None, 8),
])
def test_optimizer_spec_names_class_settings_and_state_bytes(text, cls, momentum, state_bytes):
    spec = optimizer_spec(parse_combo(text))
    assert (spec.cls, spec.momentum, spec.state_bytes_per_param) == (cls, momentum, state_bytes)
    assert spec.lr == 1e-3
    assert spec.betas == ((0.9, 0.999) if cls != "SGD" else None)
    assert spec.weight_decay == (0.1 if cls == "AdamW" else 0.0)


@pytest.mark.parametrize("text", ["baseline", "adam", "sgd", "momentum", "fused", "forloop",
                                  "sgd+fused", "momentum+forloop", "pure-bf16", "adam+fused"])
def test_the_built_optimizer_is_the_spec_and_keeps_that_state(text):
    # Given a combination, when its optimizer is built and steps once on real tensors, then
    # its class and settings are the spec's, and its state is exactly the analytic bytes.
    from lab.workloads.train import make_optimizer, param_dtype

    cfg = parse_combo(text)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)).to(param_dtype(cfg))
    opt = make_optimizer(model, cfg)
    spec = optimizer_spec(cfg)
    group = opt.param_groups[0]
    assert type(opt).__name__ == spec.cls
    assert group["lr"] == spec.lr and group["weight_decay"] == spec.weight_decay
    assert group.get("momentum") == spec.momentum and group.get("betas") == spec.betas
    assert group["foreach"] == spec.foreach and group.get("fused") == spec.fused
    model(torch.randn(2, 8, dtype=param_dtype(cfg))).sum().backward()
    opt.step()
    n = sum(p.numel() for p in model.parameters())
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v) and v.dim() > 0)  # Adam's `step` counters are scalars
    assert state == spec.state_bytes_per_param * n


# ---- the registry ---------------------------------------------------------------------------------
def test_registry_lists_the_workloads_with_sizes_and_units():
    from lab.workloads.hf_config import shipped_models

    # the lab's own, then one per shipped config.json (family hf: the plain HF loop)
    assert list(all_workloads()) == ["linear", "mlp", "gpt2-tiny", "gpt2-small", "qwen2-1.5b",
                                     *shipped_models()]
    assert get_workload("mlp").items_per_step({"batch": 4, "seq": 64}) == 256  # tokens
    assert get_workload("linear").items_per_step({"batch": 4}) == 4  # samples
    assert get_workload("gpt2-small").default_sizes("seed") == {
        "steps": 2, "layout": "gpt2-124m", "batch": 8, "seq": 1024}
    with pytest.raises(KeyError, match="no workload"):
        get_workload("gpt7")


def test_workloads_check_support_and_batch():
    with pytest.raises(ComboError, match="does not support checkpointing"):
        get_workload("linear").check(parse_combo("ckpt"))
    with pytest.raises(ComboError, match="not divisible by accum4"):
        get_workload("mlp").check(parse_combo("accum4"), {"batch": 6})
    get_workload("gpt2-tiny").check(parse_combo("bf16+ckpt+accum4+momentum+fused"), {"batch": 8})


# ---- phases ----------------------------------------------------------------------------------------
def test_phase_names_round_trip():
    assert phase("forward", 0) == "forward 0" and phase("forward", 0, 1) == "forward 0.1"
    assert parse_phase("zero_grad 3") == ("zero_grad", 3, None)
    assert parse_phase("backward 1.2") == ("backward", 1, 2)
    assert parse_phase("model") is None and parse_phase("optimizer 1") is None
    with pytest.raises(ValueError):
        phase("optimizer", 1)


def test_the_docs_hold_the_current_token_table():
    from pathlib import Path

    from lab.workloads.config import tokens_markdown

    doc = (Path(__file__).resolve().parents[2] / "docs" / "WORKLOADS.md").read_text()
    table = doc.split("<!-- tokens -->\n", 1)[1].split("\n<!-- /tokens -->", 1)[0]
    assert table == tokens_markdown(), "docs/WORKLOADS.md: regenerate the table from TOKENS"
