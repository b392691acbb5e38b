"""Lesson 09: gradient (activation) checkpointing — memory saved vs time spent.

By hand, every transformer block is wrapped (lab/workloads/train.py, enable_checkpointing):

    from torch.utils.checkpoint import checkpoint
    out = checkpoint(block, hidden_states, use_reentrant=False)   # keeps only the block's input

and through transformers: model.gradient_checkpointing_enable(...) in transformers 5.17, which
recorded this lesson (later 5.x releases call it activation_checkpointing_enable and keep the old
name as a deprecated alias; lab.workloads calls whichever exists). In backward, each block's
forward runs a second time to rebuild its activations just before they are needed.
"""

from lab.workloads import TrainConfig
from lab.workloads.tasks import LM
from lab.workloads.train import train


def run_with(run, how):
    train(run, LM(run.p.layout, run.p.batch, run.p.seq), TrainConfig(checkpointing=how),
          run.p.steps)


def baseline(run):
    run_with(run, "none")


def checkpoint_blocks(run):
    run_with(run, "blocks")


def hf_gradient_checkpointing(run):
    run_with(run, "hf")
