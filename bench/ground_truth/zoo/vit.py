"""Fine-tune a Vision Transformer (transformers' ViTForImageClassification) on random images.

    python vit.py --config vit-base-patch16-224 --batch 128 --bf16 --steps 3

Random weights from the published config (bench/ground_truth/configs/), built on the CPU and
moved with `.to("cuda")`; AdamW with weight decay; `--bf16` autocasts the forward;
`labels=` gives the model's own cross-entropy loss.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from transformers import ViTForImageClassification

from common import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="vit-base-patch16-224")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, tiny=args.tiny)
    model = ViTForImageClassification(cfg).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    size = cfg.image_size
    for step in range(args.steps):
        pixels = torch.randn(args.batch, 3, size, size).to(args.device)  # (B, 3, H, W)
        labels = torch.randint(0, cfg.num_labels, (args.batch,)).to(args.device)
        with torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16) \
                if args.bf16 else nullcontext():
            loss = model(pixel_values=pixels, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
