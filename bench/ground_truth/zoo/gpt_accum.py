"""Train a small GPT written in plain torch, with gradient accumulation under autocast.

    python gpt_accum.py --layers 12 --dim 1024 --heads 16 --batch 32 --micro-batch 8 --seq 1024

Pre-norm blocks (causal `scaled_dot_product_attention`, a GELU MLP), tied token embedding and
head; each optimizer step accumulates batch/micro-batch scaled micro-batch losses under fp16
autocast (`--amp bf16`, or fp16 with a GradScaler), then `scaler.unscale_`, `clip_grad_norm_`,
`scaler.step`, `scaler.update`, `zero_grad(set_to_none=True)`: the accumulation recipe of the AMP
docs (the scaler is a no-op in bf16, so the same loop serves both). AdamW with decay only
on matrices, as minGPT groups them.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
        x = x + self.proj(y.reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, dim: int, layers: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, targets):  # (B, T) -> loss
        x = self.tok(ids) + self.pos(torch.arange(ids.size(1), device=ids.device))
        logits = self.head(self.ln(self.blocks(x)))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--amp", choices=["bf16", "fp16"], default="bf16")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = GPT(args.vocab, args.seq, args.dim, args.layers, args.heads).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=6e-4,
                            betas=(0.9, 0.95))
    dtype = torch.float16 if args.amp == "fp16" else torch.bfloat16
    scaler = torch.amp.GradScaler(dev.type, enabled=args.amp == "fp16")
    accum = args.batch // args.micro_batch
    for step in range(args.steps):
        for _ in range(accum):
            ids = torch.randint(0, args.vocab, (args.micro_batch, args.seq + 1), device=dev)
            with torch.autocast(dev.type, dtype=dtype):
                loss = model(ids[:, :-1], ids[:, 1:]) / accum
            scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item() * accum:.4f}")


if __name__ == "__main__":
    main()
