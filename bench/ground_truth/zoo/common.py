"""What the zoo scripts share: a published config from a JSON file, and `--tiny`.

    cfg = load_config("bench/ground_truth/configs/t5-base.json", layers=None, tiny=False)

A config file is the published config.json transcribed (`_source` says from where; keys that
start with `_` are ours). `layers` keeps a layout with fewer blocks (the case table says when);
`tiny` shrinks every width, for a dry run on a CPU in seconds, never for a measured case. No lab
code: these scripts are the ground truth's, run as plain `python script.py` on the GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers",
              "num_decoder_layers")
SMALL = {"hidden_size": 64, "n_embd": 64, "d_model": 64, "intermediate_size": 128,
         "moe_intermediate_size": 32, "d_ff": 128, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
         "head_dim": 16, "d_kv": 16, "vocab_size": 512, "num_experts": 8,
         "num_experts_per_tok": 2, "image_size": 32, "patch_size": 8, "num_labels": 10}
HEAD_KEYS = ("num_attention_heads", "n_head", "num_heads", "encoder_attention_heads",
             "decoder_attention_heads")


def config_path(name: str) -> Path:
    """`t5-base` -> bench/ground_truth/configs/t5-base.json (or assets/models/NAME.json)."""
    for folder in (CONFIGS, CONFIGS.parents[2] / "assets" / "models"):
        p = folder / f"{name}.json"
        if p.exists():
            return p
    raise SystemExit(f"no config {name!r} in {CONFIGS} or assets/models")


def load_dict(name: str, layers: int | None = None, tiny: bool = False) -> dict:
    d = {k: v for k, v in json.loads(config_path(name).read_text()).items()
         if not k.startswith("_")}
    if tiny:
        d = shrink(d)
    elif layers:
        for key in LAYER_KEYS:
            if key in d:
                d[key] = layers
    return d


def load_config(name: str, layers: int | None = None, tiny: bool = False):
    """A transformers config of the published layout (random weights follow from it)."""
    from transformers import AutoConfig

    d = load_dict(name, layers, tiny)
    return AutoConfig.for_model(d.pop("model_type"), **d)


def shrink(d: dict) -> dict:
    d = dict(d)
    mha = d.get("num_key_value_heads") == d.get("num_attention_heads")
    for k, v in SMALL.items():
        if d.get(k) is not None:
            d[k] = v
    for k in HEAD_KEYS:
        if d.get(k) is not None:
            d[k] = 4
    kv = d.get("num_key_value_heads")
    if kv is not None:
        d["num_key_value_heads"] = 4 if mha else 2
    for k in ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id",
              "forced_eos_token_id"):
        if isinstance(d.get(k), int) and d[k] >= 512:
            d[k] = 0
    for key in LAYER_KEYS:
        if key in d:
            d[key] = 2
    return d
