"""Lesson 18: out of memory on a (virtual) smaller GPU, and the techniques that make it fit.

The lesson runs on a virtual GPU of `gpu_memory` bytes (16 GiB at seed scale): on CUDA the real
caching allocator is capped with torch.cuda.set_per_process_memory_fraction, so the error is
PyTorch's own; in cpu and sim modes the lab's tensor tracker raises torch.OutOfMemoryError with
a message of the same shape. The same GPT-2 step at batch 16 x 1,024 tokens, then with each
technique of the previous lessons.
"""

from lab.workloads import TrainConfig
from lab.workloads.tasks import LM
from lab.workloads.train import train


def run_with(run, **config):
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), TrainConfig(**config), run.p.steps)


def baseline(run):
    run_with(run)


def bf16(run):
    run_with(run, precision="bf16")


def checkpointing(run):
    run_with(run, checkpointing="blocks")


def micro_batches(run):
    run_with(run, micro_batches=run.p.micro_batches)


def bf16_checkpointing(run):
    run_with(run, precision="bf16", checkpointing="blocks")
