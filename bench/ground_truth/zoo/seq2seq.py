"""Train an encoder-decoder (T5, BART) from a published config on random token pairs.

    python seq2seq.py --config t5-base --batch 16 --source 512 --target 128 --steps 3

`AutoModelForSeq2SeqLM.from_config` (random weights), `.to("cuda")`, AdamW; `labels=` makes the
model shift them into decoder inputs and return its cross-entropy; `--bf16` autocasts.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from transformers import AutoModelForSeq2SeqLM

from common import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="t5-base")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--source", type=int, default=512, help="encoder tokens")
    ap.add_argument("--target", type=int, default=128, help="decoder tokens")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, tiny=args.tiny)
    model = AutoModelForSeq2SeqLM.from_config(cfg).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    for step in range(args.steps):
        src = torch.randint(3, cfg.vocab_size, (args.batch, args.source)).to(args.device)
        tgt = torch.randint(3, cfg.vocab_size, (args.batch, args.target)).to(args.device)
        with torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16) \
                if args.bf16 else nullcontext():
            loss = model(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
