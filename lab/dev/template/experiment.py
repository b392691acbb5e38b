"""Lesson {number}: {title}.

One function per variant in lesson.toml. `run.p` holds the scale's parameters, `run.device` the
device, and `run.phase(name)` marks what the memory timeline shows.
"""

import torch
from torch import nn


def baseline(run):
    with run.phase("model"):
        model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)  # weight (d_out, d_in)
    with run.phase("input"):
        x = torch.randn(run.p.batch, run.p.d_in, device=run.device)  # (B, d_in)
    with run.phase("forward"):
        y = model(x)  # (B, d_out)
    return y


def technique(run):
    with run.phase("model"):
        model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)
    with run.phase("input"):
        x = torch.randn(run.p.batch, run.p.d_in, device=run.device)
    with run.phase("forward"), torch.no_grad():
        y = model(x)
    return y
