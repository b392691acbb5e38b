"""Lesson 27: selective and partial activation checkpointing — what to recompute, and what it costs.

Lesson 09's GPT-2 training step (fp32, AdamW), with checkpointing turned from a switch into a dial:

    baseline            every block keeps every activation it saves
    every_block         checkpoint(block, x, use_reentrant=False) on all 12 blocks (lesson 09)
    every_2nd_block     the same on blocks 0, 2, 4, ... only; the others keep their activations
    hf_every_2nd_block  the same through transformers: gradient_checkpointing_enable(
                            gradient_checkpointing_kwargs={"use_reentrant": False},
                            every_n_layers=2)          (5.17; later 5.x call it
                        activation_checkpointing_enable and keep the old name as an alias)
    selective           every block checkpointed with a policy (torch.utils.checkpoint's
                        selective activation checkpointing): the outputs of the matmuls and of
                        attention are saved, everything else (LayerNorm, GeLU, adds, views) is
                        recomputed in backward

    from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                        create_selective_checkpoint_contexts)

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE

    checkpoint(block, x, use_reentrant=False,
               context_fn=partial(create_selective_checkpoint_contexts, policy))

The same code runs on a GPU, on the CPU (whose attention op is named in SAVE too) and in sim.
torch.compile's own dial, `torch._functorch.config.activation_memory_budget`, is a choice the
compiler makes over the compiled graph: the lab's tracked pass cannot run compiled code, so this
lesson describes it and measures the two eager dials.
"""

from dataclasses import replace
from functools import partial

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from lab.workloads import TrainConfig, layout
from lab.workloads.models import blocks
from lab.workloads.tasks import LM
from lab.workloads.train import get_batch, setup, train_step

aten = torch.ops.aten
# The ops whose outputs the selective policy keeps: every matmul (GPT-2's Conv1D is an addmm) and
# the attention kernels SDPA may pick (CUDA's three fused ones, the math path's bmm, the CPU's).
SAVE = {aten.mm.default, aten.addmm.default, aten.bmm.default,
        aten._scaled_dot_product_efficient_attention.default,
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_cudnn_attention.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default}


def save_matmuls(ctx, op, *args, **kwargs):
    """Keep what is expensive to recompute (matmuls, attention); recompute the cheap rest."""
    return CheckpointPolicy.MUST_SAVE if op in SAVE else CheckpointPolicy.PREFER_RECOMPUTE


def checkpoint_blocks(model, every: int = 1, context_fn=None) -> None:
    """Wrap blocks 0, every, 2·every, ... in torch.utils.checkpoint (the others are untouched)."""
    extra = {"context_fn": context_fn} if context_fn else {}
    for i, block in enumerate(blocks(model)):
        if i % every:
            continue
        plain = block.forward

        def forward(*args, _plain=plain, **kwargs):
            return checkpoint(_plain, *args, use_reentrant=False, **extra, **kwargs)

        block.forward = forward  # an instance attribute: nn.Module.__call__ finds it first


def hf_every_n_layers(run, model, n: int) -> None:
    """transformers' own dial: checkpoint every n-th decoder layer (5.17 and later)."""
    enable = (getattr(model, "activation_checkpointing_enable", None)  # later 5.x's name
              or model.gradient_checkpointing_enable)  # 5.17's
    kwargs_name = ("activation_checkpointing_kwargs" if enable.__name__.startswith("activation")
                   else "gradient_checkpointing_kwargs")
    try:
        enable(**{kwargs_name: {"use_reentrant": False}}, every_n_layers=n)
    except TypeError:  # a transformers without every_n_layers: the same blocks, by hand
        run.note(f"This transformers has no every_n_layers: blocks 0, {n}, {2 * n}, ... are "
                 "checkpointed by hand, as transformers 5.17 does.")
        checkpoint_blocks(model, every=n)


def train(run, how):
    shape = replace(layout(run.p.layout), n_layer=run.p.layers)  # GPT-2 small: 12 blocks
    task = LM(shape, run.p.batch, run.p.seq)
    model, opt, scaler = setup(run, task, TrainConfig())
    how(model)  # the checkpointing of this variant (after setup: its phase only builds)
    cfg = TrainConfig()
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)
        train_step(run, model, opt, scaler, x, y, cfg, i, task.loss)


def baseline(run):
    train(run, lambda model: None)


def every_block(run):
    train(run, lambda model: checkpoint_blocks(model, every=1))


def every_2nd_block(run):
    train(run, lambda model: checkpoint_blocks(model, every=2))


def hf_every_2nd_block(run):
    train(run, lambda model: hf_every_n_layers(run, model, 2))


def selective(run):
    policy = partial(create_selective_checkpoint_contexts, save_matmuls)
    train(run, lambda model: checkpoint_blocks(model, every=1, context_fn=policy))
