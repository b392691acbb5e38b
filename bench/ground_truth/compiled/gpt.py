"""Train a small GPT written in plain torch, eagerly or under `torch.compile` (no lab code).

    python gpt.py --layers 4 --dim 768 --heads 12 --batch 8 --seq 1024 --compile fullgraph
    python gpt.py ... --compile breaks --bf16        each block checks its activations on the host
    python gpt.py ... --compile default --ckpt       each block under torch.utils.checkpoint

Pre-norm blocks (causal `scaled_dot_product_attention`, a GELU MLP), a tied token embedding and
head, cross-entropy on the logits, AdamW, `zero_grad(set_to_none=True)`; `--bf16` wraps forward
and loss in autocast. `--compile`:

  off         eager (the twin every compiled case is measured beside)
  default     `torch.compile(model)`
  fullgraph   `torch.compile(model, fullgraph=True)`: one graph or an error
  breaks      `torch.compile(model)` with an overflow check in each block
              (`if x.abs().amax() > 1e4: warn`), which reads a value on the host and so splits
              every block into two graphs with eager code between them: graph breaks as
              practitioners' code makes them
  reduce-overhead  `torch.compile(model, mode="reduce-overhead")` (CUDA graphs)

Part of memlab's ground truth for compiled scripts (bench/ground_truth/cases.py, suite
`compiled`); `peak_of.py` reads the CUDA allocator's peaks after it ends.
"""

from __future__ import annotations

import argparse
import warnings
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, check: bool):
        super().__init__()
        self.heads, self.check = heads, check
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):  # (B, T, C)
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, C/H)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        if self.check and x.abs().amax() > 1e4:  # a value read on the host: a graph break
            warnings.warn("activations above 1e4")
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, dim: int, layers: int, heads: int, check: bool,
                 ckpt: bool):
        super().__init__()
        self.ckpt = ckpt
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, check) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied
        for m in self.modules():  # GPT-2's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, ids, targets):  # (B, T), (B, T) -> loss
        x = self.tok(ids) + self.pos(torch.arange(ids.size(1), device=ids.device))
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.ckpt else block(x)
        logits = self.head(self.ln(x))  # (B, T, vocab)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="forward and loss under bf16 autocast")
    ap.add_argument("--ckpt", action="store_true", help="each block under checkpoint()")
    ap.add_argument("--compile", default="off",
                    choices=["off", "default", "fullgraph", "breaks", "reduce-overhead"])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device(args.device)
    model = GPT(args.vocab, args.seq, args.dim, args.layers, args.heads,
                check=args.compile == "breaks", ckpt=args.ckpt).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if args.compile == "fullgraph":
        model = torch.compile(model, fullgraph=True)
    elif args.compile == "reduce-overhead":
        model = torch.compile(model, mode="reduce-overhead")
    elif args.compile != "off":
        model = torch.compile(model)
    amp = torch.autocast(dev.type, dtype=torch.bfloat16) if args.bf16 else nullcontext()
    for step in range(args.steps):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev)
        with amp:
            loss = model(ids[:, :-1], ids[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
