"""Train a Vision Transformer written in plain torch, nn.TransformerEncoder style (no transformers).

    python vit_plain.py --dim 768 --depth 12 --heads 12 --batch 64 --steps 3

A patch embedding convolution, a class token and learned positions, `nn.TransformerEncoder` of
pre-norm `nn.TransformerEncoderLayer`s (batch_first, GELU), a linear head; label smoothing,
AdamW with weight decay, a cosine schedule, fp16 autocast with `torch.amp.GradScaler`
(`--fp16`) and `clip_grad_norm_` after unscaling, as the mixed-precision recipe writes it.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn


class ViT(nn.Module):
    def __init__(self, image: int, patch: int, dim: int, depth: int, heads: int, classes: int):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, stride=patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):  # (B, 3, H, W) -> (B, classes)
        x = self.patch(x).flatten(2).transpose(1, 2)  # (B, N, C)
        x = torch.cat([self.cls.expand(len(x), -1, -1), x], dim=1) + self.pos
        return self.head(self.norm(self.encoder(x))[:, 0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--patch", type=int, default=16)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--depth", type=int, default=12)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = ViT(args.image, args.patch, args.dim, args.depth, args.heads, args.classes).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    scaler = torch.amp.GradScaler(dev.type, enabled=args.fp16)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    for step in range(args.steps):
        x = torch.randn(args.batch, 3, args.image, args.image, device=dev)
        y = torch.randint(0, args.classes, (args.batch,), device=dev)
        with torch.autocast(dev.type, dtype=torch.float16) if args.fp16 else nullcontext():
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        sched.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
