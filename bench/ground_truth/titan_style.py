"""A torchtitan-style training loop on one GPU, written for memlab's ground truth (no lab code).

What makes it torchtitan-like rather than Hugging Face-like: its own Llama-3 model (RMSNorm,
rotary embeddings as complex numbers, SDPA, SwiGLU), weights initialised on the device, fused
AdamW with betas (0.9, 0.95) and weight decay 0.1, a linear-warmup `LambdaLR`, per-block
activation checkpointing (`--ac full`, torchtitan's "full" mode), `clip_grad_norm_(foreach=True)`,
bf16 autocast (`--bf16`), and the loss computed in fp32 from flattened logits.

    python titan_style.py --dim 2048 --layers 8 --heads 32 --kv-heads 8 --vocab 128256 \
        --batch 4 --seq 1024 --steps 3 --bf16 --ac full

Prints one JSON line: `torch.cuda.max_memory_allocated()` / `max_memory_reserved()` and versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass
class ModelArgs:
    dim: int = 2048  # model width C
    n_layers: int = 8
    n_heads: int = 32
    n_kv_heads: int = 8  # grouped-query attention: n_heads // n_kv_heads queries share a kv head
    vocab_size: int = 128256
    ffn_dim: int = 8192
    max_seq_len: int = 1024
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5


def rope_table(head_dim: int, seq: int, theta: float) -> torch.Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(seq).float(), freqs)  # (T, D/2)
    return torch.polar(torch.ones_like(angles), angles)  # complex64


def apply_rope(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (B, T, H, D/2)
    out = torch.view_as_real(xc * table[None, :, None, :]).flatten(3)
    return out.type_as(x)


class Attention(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.h, self.kv, self.hd = a.n_heads, a.n_kv_heads, a.dim // a.n_heads
        self.wq = nn.Linear(a.dim, a.n_heads * self.hd, bias=False)
        self.wk = nn.Linear(a.dim, a.n_kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(a.dim, a.n_kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(a.n_heads * self.hd, a.dim, bias=False)

    def forward(self, x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = apply_rope(self.wq(x).view(b, t, self.h, self.hd), table)
        k = apply_rope(self.wk(x).view(b, t, self.kv, self.hd), table)
        v = self.wv(x).view(b, t, self.kv, self.hd)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True)  # (B, H, T, D)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class FeedForward(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.w1 = nn.Linear(a.dim, a.ffn_dim, bias=False)
        self.w2 = nn.Linear(a.ffn_dim, a.dim, bias=False)
        self.w3 = nn.Linear(a.dim, a.ffn_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a: ModelArgs):
        super().__init__()
        self.attention_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.attention = Attention(a)
        self.ffn_norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.feed_forward = FeedForward(a)

    def forward(self, x, table):
        h = x + self.attention(self.attention_norm(x), table)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, a: ModelArgs, ac: str = "none"):
        super().__init__()
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.dim)
        self.layers = nn.ModuleList(Block(a) for _ in range(a.n_layers))
        self.norm = nn.RMSNorm(a.dim, eps=a.norm_eps)
        self.output = nn.Linear(a.dim, a.vocab_size, bias=False)
        self.register_buffer("rope", rope_table(a.dim // a.n_heads, a.max_seq_len, a.rope_theta),
                             persistent=False)
        self.ac = ac

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)  # (B, T, C)
        table = self.rope[: tokens.shape[1]]
        for layer in self.layers:
            if self.ac == "full" and self.training:
                h = checkpoint(layer, h, table, use_reentrant=False)
            else:
                h = layer(h, table)
        return self.output(self.norm(h))  # (B, T, V)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--ffn-dim", type=int, default=8192)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--ac", default="none", choices=["none", "full"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    device = torch.device(args.device)
    torch.manual_seed(0)
    margs = ModelArgs(dim=args.dim, n_layers=args.layers, n_heads=args.heads,
                      n_kv_heads=args.kv_heads, vocab_size=args.vocab, ffn_dim=args.ffn_dim,
                      max_seq_len=args.seq)
    with device:
        model = Transformer(margs, ac=args.ac)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=device.type == "cuda")
    warmup = 2
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    for step in range(args.steps):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=device)
        inputs, labels = tokens[:, :-1], tokens[:, 1:]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            logits = model(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    on_gpu = device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
    print(json.dumps({
        "max_allocated": torch.cuda.max_memory_allocated() if on_gpu else None,
        "max_reserved": torch.cuda.max_memory_reserved() if on_gpu else None,
        "params": sum(p.numel() for p in model.parameters()), "torch": torch.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
