"""Lesson 13: optimizer state — SGD vs SGD + momentum vs AdamW, and foreach vs fused vs for-loop.

  SGD              no state
  SGD + momentum   one buffer per parameter (1 × the weights)
  AdamW            exp_avg and exp_avg_sq (2 × the weights) + a step counter per tensor

and three implementations of the same AdamW update:
  foreach=True     one kernel per operation over all parameters (the CUDA default): fast, but
                   its intermediates (sqrt(exp_avg_sq)) are the size of all the weights at once
  fused=True       one kernel for the whole update: no weight-sized intermediates
  foreach=False    a Python loop over parameters: intermediates one parameter at a time
"""

from lab.workloads import TrainConfig
from lab.workloads.tasks import LM
from lab.workloads.train import train


def run_with(run, optimizer, impl="foreach"):
    cfg = TrainConfig(optimizer=optimizer, impl=impl)
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), cfg, run.p.steps)


def baseline(run):
    run_with(run, "adamw", "foreach")


def sgd(run):
    run_with(run, "sgd")


def sgd_momentum(run):
    run_with(run, "momentum")


def adamw_fused(run):
    run_with(run, "adamw", "fused")


def adamw_for_loop(run):
    run_with(run, "adamw", "forloop")
