"""LoRA fine-tuning with peft: a causal LM in bf16, adapters on the attention projections.

    python lora.py --config llama-3.2-1b --batch 4 --seq 1024 --rank 16 --checkpointing

Random weights from the published config in bfloat16, `.to("cuda")`; `LoraConfig(r, alpha=2r,
dropout 0.05, target q/k/v/o_proj)`, `get_peft_model`; `--checkpointing` is transformers'
gradient checkpointing (with `enable_input_require_grads`, as peft's guides do); AdamW over the
trainable parameters only; autocast bf16 for the forward.
"""

from __future__ import annotations

import argparse

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from common import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(0)
    cfg = load_config(args.config, tiny=args.tiny)
    cfg.use_cache = False
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).to(args.device)
    if args.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.05,
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      task_type="CAUSAL_LM")
    model = get_peft_model(model, lora)
    model.print_trainable_parameters()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    model.train()
    for step in range(args.steps):
        ids = torch.randint(0, cfg.vocab_size, (args.batch, args.seq)).to(args.device)
        with torch.autocast("cuda" if "cuda" in args.device else "cpu", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
