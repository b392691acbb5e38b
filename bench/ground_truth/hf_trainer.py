"""The Hugging Face `Trainer` on a causal LM from a config, as its documentation shows it: no lab
code anywhere, random weights, an in-memory data set of random token ids.

    python hf_trainer.py --config gpt2.json --batch 8 --seq 1024 --steps 3 --bf16

`TrainingArguments` are the library's defaults except what a short run needs (max_steps, no
saving, no reporting): so the optimizer is the Trainer's default (fused AdamW on CUDA in recent
versions), and `--gradient-checkpointing` is the Trainer's own switch. Prints one JSON line with
`torch.cuda.max_memory_allocated()` / `max_memory_reserved()` and the versions. Part of memlab's
ground truth (bench/ground_truth/run_h200.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch


class RandomTokens(torch.utils.data.Dataset):
    """`n` rows of `seq` random token ids; labels are the ids (the model shifts them)."""

    def __init__(self, n: int, seq: int, vocab: int):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)  # (N, T) on the CPU

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--gradient-checkpointing", action="store_true")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run")
    ap.add_argument("--tiny", action="store_true", help="every width shrunk (a dry run)")
    args = ap.parse_args()

    import transformers
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hf_loop import load_config

    cfg = load_config(args.config, args.layers, args.tiny)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg)
    data = RandomTokens(args.batch * args.steps, args.seq, cfg.vocab_size)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out, per_device_train_batch_size=args.batch, max_steps=args.steps,
            bf16=args.bf16, gradient_checkpointing=args.gradient_checkpointing,
            logging_steps=1, save_strategy="no", report_to=[], dataloader_num_workers=0,
            use_cpu=args.device == "cpu", seed=0)
        trainer = Trainer(model=model, args=targs, train_dataset=data)
        trainer.train()
    on_gpu = args.device != "cpu"
    if on_gpu:
        torch.cuda.synchronize()
    print(json.dumps({
        "max_allocated": torch.cuda.max_memory_allocated() if on_gpu else None,
        "max_reserved": torch.cuda.max_memory_reserved() if on_gpu else None,
        "optim": str(targs.optim), "torch": torch.__version__,
        "transformers": transformers.__version__,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
