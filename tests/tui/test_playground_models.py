"""The playground's catalog offers the shipped model configs (its only door: playground_data)."""

import pytest

from lab.tui.screens.playground_data import load_catalog, make_plan
from lab.workloads.hf_config import shipped_models


def test_the_catalog_lists_every_shipped_config_with_its_full_size():
    catalog = load_catalog()
    for name in shipped_models():
        info = catalog.workloads[name]
        assert info.unit == "tokens" and set(info.sizes) == {"seed"}
        assert info.sizes["seed"]["model"] == name and info.sizes["seed"]["batch"] >= 1


def test_a_shipped_config_plans_in_sim_and_says_why_not_on_the_cpu():
    plan = make_plan("llama-3.2-1b", "sim", {"batch": 2}, ["baseline", "bf16+ckpt"])
    assert plan.sizes["model"] == "llama-3.2-1b" and plan.sizes["batch"] == 2
    with pytest.raises(KeyError, match="no 'small' sizes"):
        make_plan("llama-3.2-1b", "cpu", {}, ["baseline"])
