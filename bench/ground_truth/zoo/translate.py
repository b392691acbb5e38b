"""Train a translation model written with `nn.Transformer` (the PyTorch tutorial's encoder-decoder).

    python translate.py --dim 512 --layers 6 --heads 8 --batch 64 --source 256 --target 256

Token embeddings scaled by sqrt(dim) plus sinusoidal positions, `nn.Transformer` (batch_first,
post-norm as published, dropout 0.1), a causal target mask and padding masks, a generator
linear layer; cross-entropy with `ignore_index` on padding, Adam with the inverse-square-root
warm-up of "Attention Is All You Need".
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn as nn

PAD = 0


class Seq2Seq(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, ffn: int, max_len: int):
        super().__init__()
        self.dim = dim
        self.src_embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(vocab, dim, padding_idx=PAD)
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, dim, 2) * (-math.log(10000.0) / dim))
        pe = torch.zeros(max_len, dim)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)
        self.transformer = nn.Transformer(dim, heads, layers, layers, ffn, dropout=0.1,
                                          batch_first=True)
        self.generator = nn.Linear(dim, vocab)

    def embed(self, emb, ids):
        return emb(ids) * math.sqrt(self.dim) + self.pe[: ids.size(1)]

    def forward(self, src, tgt):  # (B, S), (B, T) -> (B, T, vocab)
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
        out = self.transformer(self.embed(self.src_embed, src), self.embed(self.tgt_embed, tgt),
                               tgt_mask=causal, src_key_padding_mask=src == PAD,
                               tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD)
        return self.generator(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--source", type=int, default=256)
    ap.add_argument("--target", type=int, default=256)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    torch.manual_seed(0)
    model = Seq2Seq(args.vocab, args.dim, args.layers, args.heads, args.ffn,
                    max(args.source, args.target)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup = 4000
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: args.dim ** -0.5 * min((s + 1) ** -0.5, (s + 1) * warmup ** -1.5))
    criterion = nn.CrossEntropyLoss(ignore_index=PAD)
    for step in range(args.steps):
        src = torch.randint(1, args.vocab, (args.batch, args.source)).to(args.device)
        tgt = torch.randint(1, args.vocab, (args.batch, args.target + 1)).to(args.device)
        logits = model(src, tgt[:, :-1])
        loss = criterion(logits.reshape(-1, logits.size(-1)), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
