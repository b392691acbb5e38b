"""Pre-train an encoder (BERT, RoBERTa) with masked language modelling on random tokens.

    python mlm.py --config bert-large-uncased --batch 32 --seq 512 --bf16 --steps 3

`AutoModelForMaskedLM.from_config` (random weights), `.to("cuda")`, AdamW. Masking as
DataCollatorForLanguageModeling does it: 15 % of the positions are predicted (labels elsewhere
-100); of those, 80 % become the mask token, 10 % a random token, 10 % stay.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

import torch
from transformers import AutoModelForMaskedLM

from common import load_config


def mask_tokens(ids: torch.Tensor, mask_id: int, vocab: int):
    labels = ids.clone()
    chosen = torch.rand(ids.shape) < 0.15
    labels[~chosen] = -100
    inputs = ids.clone()
    replace = chosen & (torch.rand(ids.shape) < 0.8)
    inputs[replace] = mask_id
    rand = chosen & ~replace & (torch.rand(ids.shape) < 0.5)
    inputs[rand] = torch.randint(vocab, ids.shape)[rand]
    return inputs, labels


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="bert-large-uncased")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--mask-token", type=int, default=103, help="[MASK] (RoBERTa: 50264)")
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, tiny=args.tiny)
    model = AutoModelForMaskedLM.from_config(cfg).to(args.device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    mask_id = min(args.mask_token, cfg.vocab_size - 1)
    for step in range(args.steps):
        ids = torch.randint(5, cfg.vocab_size, (args.batch, args.seq))  # the collator's work: CPU
        inputs, labels = mask_tokens(ids, mask_id, cfg.vocab_size)
        inputs, labels = inputs.to(args.device), labels.to(args.device)
        with torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16) \
                if args.bf16 else nullcontext():
            loss = model(input_ids=inputs, attention_mask=torch.ones_like(inputs),
                         labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
