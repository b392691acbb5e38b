"""Lesson 02: forward, loss, backward, optimizer step, zero_grad — where is the peak?

Lesson 01's nn.Linear(10_000, 50_000) becomes a classifier over 50,000 classes, trained for two
steps with AdamW on one batch of 5,000 inputs. Seed-scale sizes (float32):
  weights 2.0 GB · input 0.2 GB · output (logits) 1.0 GB · gradients 2.0 GB · AdamW state 4.0 GB
"""

import torch
import torch.nn.functional as F
from torch import nn


def make(run):
    with run.phase("model", setup=True):
        model = nn.Linear(run.p.d_in, run.p.d_out, device=run.device)  # weight (d_out, d_in)
        # foreach=True is what AdamW picks by default on CUDA; on CPU the default is a for-loop
        # with different temporaries, so we ask for it explicitly to measure the same thing.
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)  # state: at step 1
    with run.phase("data", category="inputs", setup=True):
        x = torch.randn(run.p.batch, run.p.d_in, device=run.device)  # (B, d_in)
        target = torch.randint(0, run.p.d_out, (run.p.batch,), device=run.device)  # (B,) class ids
    return model, opt, x, target


def baseline(run):
    model, opt, x, target = make(run)
    for i in range(run.p.steps):
        with run.phase(f"forward {i}"):
            out = model(x)  # (B, d_out): 1 GB at seed scale, and the name `out` keeps it alive
        with run.phase(f"loss {i}"):
            loss = F.cross_entropy(out, target)  # log_softmax saves its own (B, d_out) output
        with run.phase(f"backward {i}"):
            loss.backward()  # grad of the logits (B, d_out), then weight.grad (d_out, d_in)
        with run.phase(f"step {i}"):
            opt.step()  # AdamW: exp_avg and exp_avg_sq, each the size of the weights
        with run.phase(f"zero_grad {i}"):
            opt.zero_grad(set_to_none=True)  # the gradients are freed, not zeroed
    run.metric("loss_last", run.item(loss))


def one_expression(run):
    model, opt, x, target = make(run)
    for i in range(run.p.steps):
        with run.phase(f"forward {i}"):
            # no name holds the logits: only what autograd saved stays alive until backward
            loss = F.cross_entropy(model(x), target)
        with run.phase(f"backward {i}"):
            loss.backward()
        with run.phase(f"step {i}"):
            opt.step()
        with run.phase(f"zero_grad {i}"):
            opt.zero_grad(set_to_none=True)
    run.metric("loss_last", run.item(loss))
