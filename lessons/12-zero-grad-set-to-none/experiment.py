"""Lesson 12: optimizer.zero_grad(set_to_none=True) vs zero-filled gradients.

    optimizer.zero_grad(set_to_none=True)    # p.grad = None: the memory is freed (the default
                                             # since PyTorch 2.0)
    optimizer.zero_grad(set_to_none=False)   # p.grad.zero_(): the memory stays, filled with 0
"""

from lab.workloads import TrainConfig
from lab.workloads.tasks import LM
from lab.workloads.train import train


def run_with(run, set_to_none):
    cfg = TrainConfig(set_to_none=set_to_none)
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), cfg, run.p.steps)


def baseline(run):
    run_with(run, False)


def set_to_none(run):
    run_with(run, True)
