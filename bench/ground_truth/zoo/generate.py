"""Batched text generation with `model.generate()`: bf16 weights, greedy, a dynamic or static KV cache.

    python generate.py --config llama-3.2-1b --batch 16 --prompt 512 --new 256 --cache dynamic
    python generate.py --config llama-3.2-1b --batch 16 --prompt 512 --new 256 --cache static

Random weights from the published config in bfloat16 (`dtype=torch.bfloat16`), `.to("cuda")`,
`eval()`. Every prompt generates exactly `--new` tokens (`min_new_tokens` keeps EOS away), so
the cache's size does not depend on what random weights predict. `--cache static` is
`cache_implementation="static"` (a cache preallocated for prompt + new tokens); on CUDA
transformers then compiles the decoding step by itself unless `disable_compile=True`
(`--no-compile`): the zoo's case keeps it eager, the version sim predicts.
"""

from __future__ import annotations

import argparse

import torch
from transformers import AutoModelForCausalLM

from common import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--cache", choices=["dynamic", "static"], default="dynamic")
    ap.add_argument("--no-compile", action="store_true",
                    help="disable_compile=True: no automatic torch.compile of a static cache")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, tiny=args.tiny)
    cfg.use_cache = True
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).to(args.device).eval()
    ids = torch.randint(0, cfg.vocab_size, (args.batch, args.prompt)).to(args.device)
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=args.new,
                         min_new_tokens=args.new, do_sample=False, pad_token_id=0,
                         cache_implementation="static" if args.cache == "static" else None,
                         disable_compile=args.no_compile or None)
    print(f"generated {tuple(out.shape)} tokens")


if __name__ == "__main__":
    main()
