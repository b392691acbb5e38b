"""Lesson 26: your own training script, predicted without a GPU.

Every variant runs train.py, beside this file: a plain CUDA training script (GPT-2 small from a
transformers config, random weights, AdamW) that never imports the lab and says
`device = "cuda"`. It runs exactly as

    memlab profile --mode sim -- python train.py ARGS

runs it (lab.profile.script, the experiment behind `memlab profile`): the tracker finds the
phases from PyTorch's own hooks, and in sim the script runs inside the CUDA facade, so its
`cuda` tensors land on the simulated H200 and its own torch.cuda calls print the allocator
model's prediction. The variants differ by one line each, given as the script's flags:

    baseline      as shipped: fp32, batch 8 x 1,024 tokens, zero_grad(set_to_none=True)
    small_batch   --batch 2               the batch size
    bf16          --bf16                  torch.autocast("cuda", dtype=torch.bfloat16)
    bf16_ckpt     --bf16 --ckpt           ... and model.gradient_checkpointing_enable()
    keep_grads    --no-set-to-none        opt.zero_grad(set_to_none=False)
"""

import shlex
import tempfile
from pathlib import Path

from lab.profile.script import run_script

TRAIN = Path(__file__).resolve().with_name("train.py")


def train_py(run, *flags, batch=None):
    """train.py with `flags`, stopped after run.p.steps optimizer steps (memlab profile's
    default in sim), and the command that gives the same run in a shell."""
    args = ["--batch", str(batch or run.p.batch), "--seq", str(run.p.seq), *flags]
    run.note("the same run from a shell: memlab profile --mode sim --steps "
             f"{run.p.steps} -- python {shlex.join([str(TRAIN), *args])}")
    with tempfile.NamedTemporaryFile("r", suffix=".log", encoding="utf-8") as out:
        try:
            run_script(run, TRAIN, args, steps=run.p.steps, output_path=out.name)
        finally:
            printed = [line for line in out.read().splitlines() if line.startswith("step ")]
            if printed:  # its own torch.cuda.max_memory_allocated(), answered by the model
                run.note(f"train.py printed: {printed[-1]}")


def baseline(run):
    train_py(run)


def small_batch(run):
    train_py(run, batch=run.p.small_batch)


def bf16(run):
    train_py(run, "--bf16")


def bf16_ckpt(run):
    train_py(run, "--bf16", "--ckpt")


def keep_grads(run):
    train_py(run, "--no-set-to-none")
