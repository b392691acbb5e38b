"""Lesson 29: what torch.compile does to a training step's memory.

Lesson 24's GPT-2 step (bf16 autocast, AdamW, 8 x 1,024 tokens), eager and compiled:

    baseline         eager: the step as every lesson before ran it
    compiled         model = torch.compile(model): Dynamo captures the forward, AOTAutograd
                     derives the backward and its partitioner chooses what forward saves for it,
                     Inductor fuses the elementwise ops into a few kernels; the loss (the
                     cross-entropy over the (B, T, V) logits) stays eager
    compiled_loss    the loss compiled with the model: torch.compile(forward and loss), so the
                     cross-entropy over the logits is in the graph as well
    reduce_overhead  torch.compile(..., mode="reduce-overhead"): the same graphs replayed as
                     CUDA graphs, whose memory comes from a private pool of the allocator

How it is measured: the tracker is a TorchDispatchMode, and Dynamo does not compile while one is
on (a compiled model would run its eager version under it). So every variant runs its steps in
`run.untracked()`: the tracker is off, and the numbers are the CUDA allocator's own counters and
history (lab/measure/allocator_view.py), the same way for the eager baseline, so that the four
compare. In sim (and on the CPU) `run.compile` gives the model back uncompiled: Inductor's
kernels cannot run on fake tensors, so sim shows the eager step for every variant and says so.
"""

import torch

from lab.workloads import TrainConfig
from lab.workloads.phases import phase
from lab.workloads.tasks import LM
from lab.workloads.train import autocast, get_batch, setup


def train(run, *, compile_model=None, compile_loss=False):
    task = LM(run.p.layout, run.p.batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(precision="bf16"))

    def loss_of(x, y):  # forward and the loss (lesson 06's logits and cross-entropy)
        return task.loss(model, x, y)

    if compile_loss:
        loss_of = run.compile(loss_of, **compile_model)
    elif compile_model is not None:
        model = run.compile(model, **compile_model)
    cuda_graphs = (compile_model or {}).get("mode") == "reduce-overhead" and run.compiles
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)
        with run.untracked():  # Dynamo compiles only with no dispatch mode on
            if cuda_graphs:  # a new step: the graphs' outputs of the last one may be reused
                torch.compiler.cudagraph_mark_step_begin()
            with run.phase(phase("forward", i)):
                with autocast(run.device, "bf16"):
                    loss = loss_of(x, y)
            with run.phase(phase("backward", i)):
                loss.backward()
            with run.phase(phase("step", i)):
                opt.step()
            with run.phase(phase("zero_grad", i)):
                opt.zero_grad(set_to_none=True)
        del loss


def baseline(run):
    train(run)


def compiled(run):
    train(run, compile_model={})


def compiled_loss(run):
    train(run, compile_model={}, compile_loss=True)


def reduce_overhead(run):
    train(run, compile_model={"mode": "reduce-overhead"})
