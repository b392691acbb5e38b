"""Data-parallel training on N ranks: DDP, ZeRO-1 and FSDP2, the way PyTorch's docs write them.

Every rank trains the same model on its own batch (`batch` sequences of `seq` tokens per rank);
what a rank holds is what the strategy shards:

    ddp     model = DistributedDataParallel(model)
            every rank: the whole model, its gradients, the optimizer state, and the gradient
            buckets the all-reduce runs on (the model's gradient size again: DDP's default
            copies each gradient into its bucket; gradient_as_bucket_view=True would not)
    zero1   DDP as above + ZeroRedundancyOptimizer(params, optimizer_class=AdamW, ...)
            the optimizer state is split across ranks (whole tensors per rank); each rank
            updates its part and broadcasts the new parameters
    fsdp    fully_shard(block, mesh=mesh) for every transformer block, then fully_shard(model)
            parameters, gradients and optimizer state split 1/N (DTensors, dim 0 padded to a
            multiple of N); each block's parameters are all-gathered just before its forward
            and its backward, and freed after; gradients are reduce-scattered per block
    fsdp + bf16   MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32): the blocks
            are all-gathered in bf16 and compute in bf16; the shards, the gradients and the
            optimizer state stay fp32 (ddp/zero1 + bf16 autocast instead, as everywhere)
    + ckpt  activation checkpointing per block (torch.utils.checkpoint, use_reentrant=False)

Phases as in lab/experiments/train.py: model, data i, forward i, backward i, step i, zero_grad i.
The ranks are real (one process each, started by the runner) or simulated in one process
(sim): lab/measure/distributed.py.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from lab.measure import distributed

from .data import lm_batch
from .models import Layout, build_model, layout, transformer_blocks
from .train import TrainConfig, Workload, enable_checkpointing, make_optimizer, train_step

STRATEGIES = ("ddp", "zero1", "fsdp")


def check(strategy: str, cfg: TrainConfig) -> None:
    """What this module does not combine (yet); a one-line ValueError."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use {', '.join(STRATEGIES)}")
    if cfg.micro_batches > 1:
        raise ValueError(f"{strategy} with gradient accumulation is not supported here (it "
                         "needs no_sync() / set_requires_gradient_sync(False))")
    if strategy == "fsdp" and cfg.precision == "fp16":
        raise ValueError("fsdp + fp16 needs a sharded GradScaler; use bf16")


def optimizer_class_and_kwargs(cfg: TrainConfig) -> tuple[type, dict]:
    """What lab/experiments/train.make_optimizer builds, as a class and its arguments:
    ZeroRedundancyOptimizer builds the optimizer itself, over its rank's part (a test keeps the
    two equal)."""
    impl = {"foreach": dict(foreach=True), "fused": dict(fused=True),
            "for-loop": dict(foreach=False)}[cfg.impl]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW, dict(lr=cfg.lr, weight_decay=0.1, **impl)
    return torch.optim.SGD, dict(lr=cfg.lr, momentum=0.9 if cfg.optimizer == "momentum" else 0.0,
                                 **impl)


def wrap(run, model, strategy: str, cfg: TrainConfig, ranks: distributed.Ranks):
    """(the model to train, its optimizer) under `strategy`."""
    if strategy in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        with distributed.ddp_buckets(run) as buckets:
            model = DDP(model)
        distributed.prepare_ddp(run, model, ranks)
        run.metric("ddp_bucket_bytes", buckets["bytes"] if run.tracker else None)
        if strategy == "ddp":
            return model, make_optimizer(model, cfg)
        from torch.distributed.optim import ZeroRedundancyOptimizer

        cls, kwargs = optimizer_class_and_kwargs(cfg)
        return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=cls, **kwargs)

    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = distributed.device_mesh(ranks)
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if cfg.precision == "bf16" else MixedPrecisionPolicy())
    for block in transformer_blocks(model):
        fully_shard(block, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)  # the rest: embeddings, final norm, LM head
    run.watch(model)  # FSDP2 sets its sharded parameters without nn.Module's hooks
    return model, make_optimizer(model, cfg)


def train_parallel(run, work: Workload, strategy: str, steps: int) -> list:
    """`steps` optimizer steps of `work` on `run.p.world_size` ranks under `strategy`."""
    cfg = work.config
    check(strategy, cfg)
    lay = work.layout if isinstance(work.layout, Layout) else layout(work.layout)
    # fsdp's bf16 is its MixedPrecisionPolicy, not autocast
    step_cfg = replace(cfg, precision="fp32") if strategy == "fsdp" else cfg
    losses = []
    with distributed.join(run) as ranks:
        run.metric("rank", ranks.rank)
        run.metric("world_size", ranks.world_size)
        with run.phase("model", setup=True):
            model = build_model(lay, run.device)
            enable_checkpointing(model, cfg.checkpointing)
            model, opt = wrap(run, model, strategy, cfg, ranks)
        for i in range(steps):
            with run.phase(f"data {i}", category="inputs", setup=True):
                # each rank its own batch (data parallel): the rank seeds it
                x, y = lm_batch(lay, work.batch, work.seq, i, run.device, seed=ranks.rank)
            losses.append(train_step(run, model, opt, None, x, y, step_cfg, i))
            if i == 0 and strategy == "fsdp":
                run.metric("fsdp_unsharded_block_bytes", distributed.fsdp_unsharded(run, model))
            del x, y
        if not run.simulated:
            run.metric("loss_first", run.item(losses[0]))
            run.metric("loss_last", run.item(losses[-1]))
        del model, opt
    return losses
