"""Train a causal LM with PyTorch Lightning: a LightningModule and `Trainer.fit`, as its docs show.

    python lightning_lm.py --config gpt2 --batch 8 --seq 1024 --precision bf16-mixed --steps 3

A LightningModule around `AutoModelForCausalLM.from_config` (random weights), AdamW in
`configure_optimizers`, a DataLoader over random token ids; `Trainer(max_steps=..., precision=...,
accumulate_grad_batches=...)` with no logger, checkpoint or progress bar (nothing to write).
"""

from __future__ import annotations

import argparse

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset
from transformers import AutoModelForCausalLM

from common import load_config


class RandomTokens(Dataset):
    def __init__(self, n: int, seq: int, vocab: int):
        self.ids = torch.randint(0, vocab, (n, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return self.ids[i]


class LitLM(pl.LightningModule):
    def __init__(self, cfg):
        super().__init__()
        self.model = AutoModelForCausalLM.from_config(cfg)

    def training_step(self, ids, batch_idx):
        return self.model(input_ids=ids, labels=ids).loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="gpt2")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--precision", default="bf16-mixed", choices=["32-true", "bf16-mixed",
                                                                  "16-mixed", "bf16-true"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    pl.seed_everything(0)
    cfg = load_config(args.config, args.layers, args.tiny)
    cfg.use_cache = False
    data = DataLoader(RandomTokens(args.batch * args.steps * args.accumulate, args.seq,
                                   cfg.vocab_size), batch_size=args.batch)
    trainer = pl.Trainer(max_steps=args.steps, precision=args.precision,
                         accelerator="gpu" if "cuda" in args.device else "cpu", devices=1,
                         accumulate_grad_batches=args.accumulate, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(LitLM(cfg), data)
    print(f"trained {trainer.global_step} steps")


if __name__ == "__main__":
    main()
