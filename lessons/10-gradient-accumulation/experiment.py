"""Lesson 10: a smaller batch + gradient accumulation — the same effective batch.

    for xm, ym in zip(x.chunk(n), y.chunk(n)):      # n micro-batches of B/n sequences
        loss = loss_fn(model(xm), ym) / n           # / n: the mean over the whole batch
        loss.backward()                             # gradients ADD UP in p.grad
    optimizer.step(); optimizer.zero_grad()         # one step per full batch

Only one micro-batch's activations are alive at a time. The gradients are the full-batch
gradients (the loss is a mean and dropout is off), up to float rounding: the experiment records
their norm and the sum of their absolute values before the first step, so the two variants can
be compared number by number.

The loop is `lab.workloads.train.train_step`'s, written out to make room for that comparison. It
keeps the same tensors alive (one detached loss per step), so the baseline is, byte for byte, the
training step that lessons 08, 09, 12 and 13 run.
"""

import torch

from lab.workloads import TrainConfig
from lab.workloads.models import lm_loss
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup


def grad_summary(model) -> tuple[float, float]:
    """The gradients' norm and the sum of their absolute values, as Python floats.

    A function of its own so that the list of gradients dies when it returns: a `grads` list
    left in the training loop would keep step 0's gradients alive through
    zero_grad(set_to_none=True) and add them to every later peak.
    """
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    abs_sum = sum(g.abs().sum(dtype=torch.float64) for g in grads)
    return norm.item(), abs_sum.item()


def train_accumulating(run, n):
    task = LM(run.p.layout, run.p.batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(micro_batches=n))
    losses = []  # one detached scalar per step, as lab.workloads.train keeps them
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)  # (B, T): the same data in both variants
        total = None
        for k, (xm, ym) in enumerate(zip(x.chunk(n), y.chunk(n))):  # (B/n, T) each
            tag = f"{i}" if n == 1 else f"{i}.{k}"
            with run.phase(f"forward {tag}"):
                loss = lm_loss(model, xm, ym) / n  # / n: the mean over the whole batch
            with run.phase(f"backward {tag}"):
                loss.backward()  # gradients ADD UP in p.grad
            total = loss.detach() if total is None else total + loss.detach()
        losses.append(total)
        if i == 0 and not run.simulated:
            with run.phase("compare gradients", setup=True):  # a few bytes, outside the step
                norm, abs_sum = grad_summary(model)
                run.metric("grad_norm", norm)
                run.metric("grad_abs_sum", abs_sum)
        with run.phase(f"step {i}"):
            opt.step()
        with run.phase(f"zero_grad {i}"):
            opt.zero_grad(set_to_none=True)
    if not run.simulated:
        run.metric("loss_first", run.item(losses[0]))
        run.metric("loss_last", run.item(losses[-1]))


def baseline(run):
    train_accumulating(run, 1)


def accumulate(run):
    train_accumulating(run, run.p.micro_batches)
