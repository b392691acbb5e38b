"""The playground's own small workloads: a big `nn.Linear` and a residual MLP stack.

Config in `run.p` (sizes); shapes in comments. Random weights and random data: memory does not
depend on values.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .techniques import Techniques
from .training import dtype_of, run_steps


class MLPBlock(nn.Module):
    """x + W2·gelu(W1·x): the feed-forward half of a transformer block."""

    def __init__(self, d_model: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, device=device, dtype=dtype)
        self.up = nn.Linear(d_model, hidden, device=device, dtype=dtype)  # (d, 4d)
        self.down = nn.Linear(hidden, d_model, device=device, dtype=dtype)  # (4d, d)

    def forward(self, x):  # (B, T, d)
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class MLPStack(nn.Module):
    def __init__(self, layers: int, d_model: int, hidden: int, device=None, dtype=None):
        super().__init__()
        self.blocks = nn.ModuleList(MLPBlock(d_model, hidden, device, dtype) for _ in range(layers))
        self.checkpointing = False

    def forward(self, x):
        for block in self.blocks:
            if self.checkpointing and self.training and torch.is_grad_enabled():
                x = checkpoint(block, x, use_reentrant=False)  # keep only x; recompute inside
            else:
                x = block(x)
        return x


class LinearModel(nn.Module):
    def __init__(self, d_in: int, d_out: int, device=None, dtype=None):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out, device=device, dtype=dtype)  # weight (d_out, d_in)
        self.checkpointing = False

    def forward(self, x):
        return self.linear(x)


def _mse(model, x, y):
    return torch.nn.functional.mse_loss(model(x).float(), y.float())


def linear_step(run, t: Techniques) -> None:
    p = run.p
    dtype = dtype_of(p.dtype)
    with run.phase("model", setup=True):
        model = LinearModel(p.d_in, p.d_out, device=run.device, dtype=dtype)
    with run.phase("data", setup=True, category="inputs"):
        x = torch.randn(p.batch, p.d_in, device=run.device, dtype=dtype)  # (B, d_in)
        y = torch.randn(p.batch, p.d_out, device=run.device, dtype=dtype)  # (B, d_out)
    run_steps(run, model, (x, y), _mse, t)


def mlp_step(run, t: Techniques) -> None:
    p = run.p
    dtype = dtype_of(p.dtype)
    with run.phase("model", setup=True):
        model = MLPStack(p.layers, p.d_model, p.hidden_mult * p.d_model, run.device, dtype)
    with run.phase("data", setup=True, category="inputs"):
        x = torch.randn(p.batch, p.seq, p.d_model, device=run.device, dtype=dtype)  # (B, T, d)
        y = torch.randn(p.batch, p.seq, p.d_model, device=run.device, dtype=dtype)
    run_steps(run, model, (x, y), _mse, t)
