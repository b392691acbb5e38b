"""Lesson 01: a big nn.Linear — weights, an input, an output, and what autograd keeps alive.

Seed scale: nn.Linear(10_000, 50_000) in float32 is 10_000 × 50_000 × 4 B = 2.0 GB of weights
(+ 0.2 MB of bias); an input of 5_000 × 10_000 is 0.2 GB; the output 5_000 × 50_000 is 1.0 GB.
"""

import torch
from torch import nn


def forward_loop(run, model):
    # Three passes, as in the Hugging Face blog's example. When `inputs` is reassigned, the
    # old input is *not* freed if the old `outputs` still holds the autograd graph that saved it
    # (Linear saves its input to compute the weight gradient later).
    for i in range(run.p.passes):  # phases count from 0, as everywhere in the lab
        with run.phase(f"input {i}", category="inputs"):
            inputs = torch.randn(run.p.batch, run.p.d_in, device=run.device)  # (B, d_in)
        with run.phase(f"forward {i}"):
            outputs = model(inputs)  # (B, d_out)
    return outputs


def baseline(run):
    with run.phase("model", setup=True):
        model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)  # weight (d_out, d_in)
    forward_loop(run, model)


def no_grad(run):
    with run.phase("model", setup=True):
        model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)
    with torch.no_grad():  # no graph: nothing saves the input, so it dies when reassigned
        forward_loop(run, model)
