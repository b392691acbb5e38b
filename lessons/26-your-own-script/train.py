"""Train GPT-2 small (124M parameters, random weights) on random tokens: a plain CUDA loop.

    python train.py                     fp32, batch 8 x 1,024 tokens, AdamW
    python train.py --batch 2           a smaller batch
    python train.py --bf16              bf16 autocast
    python train.py --bf16 --ckpt       ... and activation checkpointing
    python train.py --no-set-to-none    zero_grad fills the gradients with zeros instead of
                                        freeing them

Nothing here knows about memlab. Without a GPU, memlab predicts what it needs on one:

    memlab profile --mode sim -- python train.py --batch 2
"""

import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser(description="Train GPT-2 small on random tokens.")
    ap.add_argument("--batch", type=int, default=8, help="sequences per step (default 8)")
    ap.add_argument("--seq", type=int, default=1024, help="tokens per sequence (GPT-2: 1024)")
    ap.add_argument("--steps", type=int, default=1000, help="optimizer steps")
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast for forward and loss")
    ap.add_argument("--ckpt", action="store_true", help="activation checkpointing, every block")
    ap.add_argument("--set-to-none", action=argparse.BooleanOptionalAction, default=True,
                    help="zero_grad frees the gradients (the default) or zeroes them in place")
    args = ap.parse_args()

    torch.manual_seed(0)
    device = "cuda"
    config = GPT2Config(use_cache=False)  # GPT-2 small: 12 blocks, 768 wide, 50,257 tokens
    with torch.device(device):
        model = GPT2LMHeadModel(config)  # random weights, made on the GPU
    model.train()
    if args.ckpt:  # keep each block's input only; recompute the block in backward
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)

    # one batch of random tokens stands in for a data loader: (B, T) token ids
    x = torch.randint(0, config.vocab_size, (args.batch, args.seq), device=device)

    for step in range(args.steps):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(input_ids=x, labels=x).loss  # logits (B, T, V) inside
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=args.set_to_none)
        print(f"step {step}: loss {loss.item():.4f}, "
              f"max allocated {torch.cuda.max_memory_allocated() / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
