"""Train a small Mixtral-style mixture-of-experts LM whose experts are looped over by hand.

    python moe_loop.py --dim 1024 --layers 8 --experts 8 --top-k 2 --batch 8 --seq 1024 --bf16

Each block: RMSNorm, causal self-attention (scaled_dot_product_attention), RMSNorm, then the
router picks `--top-k` of `--experts` SwiGLU experts per token and the layer loops over the
experts, gathering each one's tokens with `torch.where` and adding its weighted output back with
`index_add_` (the loop Mixtral's first transformers implementation used). How many tokens each
expert gets depends on the router's values: random weights, seed 0.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MoE(nn.Module):
    def __init__(self, dim: int, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(experts))

    def forward(self, x):  # (B, T, C)
        B, T, C = x.shape
        x = x.view(-1, C)  # (N, C)
        probs = F.softmax(self.gate(x), dim=-1, dtype=torch.float)
        weights, chosen = torch.topk(probs, self.top_k, dim=-1)  # (N, k)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = torch.zeros_like(x)
        mask = F.one_hot(chosen, num_classes=len(self.experts)).permute(2, 1, 0)  # (E, k, N)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(mask[e])
            y = expert(x[token]) * weights[token, slot, None]
            out.index_add_(0, token, y.to(x.dtype))
        return out.view(B, T, C)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int, experts: int, top_k: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.moe = MoE(dim, hidden, experts, top_k)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.moe(self.norm2(x))


class MoELM(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, hidden: int, experts: int,
                 top_k: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden, experts, top_k)
                                    for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids):  # (B, T) -> (B, T, vocab)
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2816)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    model = MoELM(args.vocab, args.dim, args.layers, args.heads, args.hidden, args.experts,
                  args.top_k).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=args.device.startswith("cuda"))
    autocast = (torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16)
                if args.bf16 else nullcontext())
    for step in range(args.steps):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=args.device)
        with autocast:
            logits = model(ids[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
