"""Lesson 07: evaluation with autograd on, under torch.no_grad(), under torch.inference_mode().

Seed scale: GPT-2 small (124 M parameters) evaluating the loss of batches of 8 × 1,024 tokens.
The model is in eval() mode in every variant: eval() only changes dropout / batch-norm
behaviour; it does NOT turn autograd off. With autograd on, the loop's `loss` names the previous
batch's graph while the next one is built (two graphs at the peak); one_graph drops it first.
"""

import torch

from lab.workloads.data import lm_batch
from lab.workloads.models import build_model, lm_loss
from lab.workloads.registry import layout


def evaluate(run, grad_mode, drop_loss: bool = False):
    lay = layout(run.p.layout)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device).eval()
    ctx = {"grad": torch.enable_grad, "no_grad": torch.no_grad,
           "inference_mode": torch.inference_mode}[grad_mode]
    losses = []
    for i in range(run.p.steps):
        with run.phase(f"data {i}", category="inputs", setup=True):
            x, y = lm_batch(lay, run.p.batch, run.p.seq, i, run.device, split="eval")  # (B, T)
        with run.phase(f"eval {i}"), ctx():
            loss = lm_loss(model, x, y)  # with grad: `loss` holds the graph and its activations
        losses.append(run.item(loss))  # a Python float (None in simulation)
        if drop_loss:
            del loss  # its graph goes now, before the next batch builds one: one graph at a time
    run.metric("eval_loss", losses[-1])


def baseline(run):
    evaluate(run, "grad")


def one_graph(run):
    evaluate(run, "grad", drop_loss=True)


def no_grad(run):
    evaluate(run, "no_grad")


def inference_mode(run):
    evaluate(run, "inference_mode")
