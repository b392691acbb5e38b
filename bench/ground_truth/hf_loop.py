"""A plain Hugging Face causal-LM training loop, as a user writes it: no lab code anywhere.

    python hf_loop.py --config qwen3-0.6b.json --combo bf16+ckpt --batch 4 --seq 512 --steps 3

    model = AutoModelForCausalLM.from_config(config)        # random weights, no hub
    for step in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):  # bf16 combos only
            loss = model(input_ids=ids, labels=ids).loss   # --compile: torch.compile(model)
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)   # AdamW defaults
                                                   # (--no-set-to-none: False)

and prints one JSON line: `torch.cuda.max_memory_allocated()` / `max_memory_reserved()` with the
torch and transformers versions it ran on. `--layers N` keeps a published layout but fewer
blocks (the case table says when); `--tiny` shrinks every width too, for a dry run on a CPU.
Part of memlab's ground truth (bench/ground_truth/run_h200.py runs it in a fresh process).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


def load_config(path: str, layers: int | None, tiny: bool):
    from transformers import AutoConfig

    d = {k: v for k, v in json.loads(Path(path).read_text()).items() if not k.startswith("_")}
    if tiny:
        d = shrink(d)
    if layers:
        key = next(k for k in LAYER_KEYS if k in d)
        d[key] = layers
        if d.get("layer_types"):  # keep the published pattern (e.g. 5 sliding, 1 full)
            d["layer_types"] = (d["layer_types"] * layers)[:layers]
    cfg = AutoConfig.for_model(d.pop("model_type"), **d)
    cfg.use_cache = False
    return cfg


def shrink(d: dict) -> dict:
    """Every width small, the features kept (GQA ratio, multi-query, sliding window, softcaps):
    proves the script and its arguments on a CPU in seconds. Never used for a measured case."""
    d = dict(d)
    heads_key = "num_attention_heads" if "num_attention_heads" in d else "n_head"
    heads = d.get(heads_key, 4)
    small = {"hidden_size": 64, "n_embd": 64, "intermediate_size": 128, "ffn_dim": 128,
             "word_embed_proj_dim": 32, "head_dim": 16, "rotary_dim": 8, "vocab_size": 512,
             "sliding_window": 8, "query_pre_attn_scalar": 16}
    for k, v in small.items():
        if d.get(k) is not None:
            d[k] = v
    if d.get("n_inner") is not None:
        d["n_inner"] = 128
    d[heads_key] = 4
    kv = d.get("num_key_value_heads")
    if kv is not None:
        d["num_key_value_heads"] = 4 if kv == heads else (1 if kv == 1 else 2)
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if isinstance(d.get(k), int) and d[k] >= 512:
            d[k] = 0
    key = next(k for k in LAYER_KEYS if k in d)
    d[key] = 2
    if d.get("layer_types"):
        kinds = list(dict.fromkeys(d["layer_types"]))
        d["layer_types"] = (kinds * 2)[:2]
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="a config.json (model_type + fields)")
    ap.add_argument("--combo", default="fp32", choices=["fp32", "bf16", "bf16+ckpt", "fp32+ckpt"])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=None, help="fewer blocks than published")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="every width shrunk (a dry run)")
    ap.add_argument("--compile", action="store_true",
                    help="model = torch.compile(model) (the compiled ground truth)")
    ap.add_argument("--no-set-to-none", dest="set_to_none", action="store_false",
                    help="opt.zero_grad(set_to_none=False): gradients stay allocated, zeroed")
    args = ap.parse_args()

    import transformers
    from transformers import AutoModelForCausalLM

    cfg = load_config(args.config, args.layers, args.tiny)
    torch.manual_seed(0)
    device = torch.device(args.device)
    with device:
        model = AutoModelForCausalLM.from_config(cfg)
    model.train()
    if "ckpt" in args.combo:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.compile:
        model = torch.compile(model)
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq), device=device)  # (B, T)
    bf16 = "bf16" in args.combo
    for step in range(args.steps):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=args.set_to_none)
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
    print(json.dumps({
        "max_allocated": torch.cuda.max_memory_allocated() if on_gpu else None,
        "max_reserved": torch.cuda.max_memory_reserved() if on_gpu else None,
        "params": sum(p.numel() for p in model.parameters()),
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "torch": torch.__version__, "transformers": transformers.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
