"""Train a causal LM from a published config (dense or mixture of experts) in a plain loop.

    python causal_lm.py --config qwen3-30b-a3b --layers 2 --batch 2 --seq 1024 --bf16 --steps 3
    python causal_lm.py --config qwen2.5-0.5b --batch 16 --micro-batch 4 --bf16     # accumulation

`AutoModelForCausalLM.from_config` (random weights; a MoE config takes transformers' own experts
path, grouped matrix multiplies), `.to("cuda")`, AdamW. `--micro-batch M` splits each batch into
batch/M micro-batches whose scaled losses accumulate gradients before one optimizer step, with
`clip_grad_norm_(1.0)` before it, as the gradient-accumulation recipes write it.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from transformers import AutoModelForCausalLM

from common import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--layers", type=int, default=None, help="fewer blocks than published")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--micro-batch", type=int, default=None)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, args.layers, args.tiny)
    cfg.use_cache = False
    model = AutoModelForCausalLM.from_config(cfg).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    micro = args.micro_batch or args.batch
    accum = args.batch // micro
    autocast = (torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16)
                if args.bf16 else nullcontext())
    for step in range(args.steps):
        batch = torch.randint(0, cfg.vocab_size, (args.batch, args.seq))  # (B, T) from a loader
        for chunk in batch.split(micro):
            ids = chunk.to(args.device)
            with autocast:
                loss = model(input_ids=ids, labels=ids).loss / accum
            loss.backward()
        if accum > 1:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item() * accum:.4f}")


if __name__ == "__main__":
    main()
