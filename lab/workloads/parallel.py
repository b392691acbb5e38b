"""Data-parallel training on N ranks: DDP, ZeRO-1 and FSDP2, the way PyTorch's docs write them.

Every rank trains the same model on its own batch (`batch` sequences of `seq` tokens per rank);
what a rank holds is what the strategy (`TrainConfig.parallel`) shards:

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
            optimizer state stay fp32 (ddp/zero1 + bf16: autocast, as everywhere)
    + ckpt  activation checkpointing per block (torch.utils.checkpoint, use_reentrant=False)
    fsdp + offload  CPUOffloadPolicy() (pin_memory=True): shards, gradients and optimizer state in
            pinned host memory, the optimizer steps on the CPU; each block's shards are copied to
            the GPU before its all-gather (sim models it: lab/measure/sim/kernels/fsdp_offload.py)

Phases as in lab/workloads/train.py: model, data i, forward i, backward i, step i, zero_grad i.
The ranks are real (one process each, started by the runner) or simulated in one process
(sim): lab/measure/distributed.py.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from lab.measure import ddp, distributed

from .config import TrainConfig
from .models import blocks
from .optim import optimizer_spec
from .phases import MODEL
from .train import enable_checkpointing, get_batch, make_optimizer, make_scaler, param_dtype, train_step

if TYPE_CHECKING:
    from .tasks import Task


def wrap(run, model, cfg: TrainConfig, ranks: distributed.Ranks):
    """(the model to train, its optimizer) under `cfg.parallel`."""
    if cfg.parallel in ("ddp", "zero1"):
        from torch.nn.parallel import DistributedDataParallel as DDP

        with ddp.ddp_buckets(run) as buckets:
            model = DDP(model)
        ddp.prepare_ddp(run, model, ranks, buckets)
        run.metric("ddp_bucket_bytes", buckets["bytes"] if run.tracker else None)
        if cfg.parallel == "ddp":
            return model, make_optimizer(model, cfg)
        from torch.distributed.optim import ZeroRedundancyOptimizer

        spec = optimizer_spec(cfg, next(model.parameters()).element_size())
        cls = getattr(torch.optim, spec.cls)
        return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=cls,
                                              **spec.kwargs())

    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    mesh = distributed.device_mesh(ranks)
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if cfg.precision == "bf16" else MixedPrecisionPolicy())
    if cfg.offload == "cpu" and not run.cuda_kernels:
        raise ValueError("fsdp+offload moves the shards from the GPU to the host; on cpu the host "
                         "is the device: run it in sim (--mode sim)")
    # offload: PyTorch's default CPUOffloadPolicy (pin_memory=True)
    off = CPUOffloadPolicy() if cfg.offload == "cpu" else OffloadPolicy()
    for block in blocks(model):
        fully_shard(block, mesh=mesh, mp_policy=mp, offload_policy=off)
    fully_shard(model, mesh=mesh, mp_policy=mp, offload_policy=off)  # the rest: embeddings, final norm, LM head
    run.watch(model)  # FSDP2 sets its sharded parameters without nn.Module's hooks
    return model, make_optimizer(model, cfg)


def train_parallel(run, task: Task, cfg: TrainConfig, steps: int) -> list:
    """`steps` optimizer steps of `task` on `run.p.world_size` ranks under `cfg.parallel`."""
    if cfg.parallel not in ("ddp", "zero1", "fsdp"):
        raise ValueError(f"TrainConfig.parallel={cfg.parallel!r}: not data parallel")
    # fsdp's bf16 is its MixedPrecisionPolicy (in wrap), not autocast
    step_cfg = replace(cfg, precision="fp32") if cfg.parallel == "fsdp" else cfg
    losses = []
    with distributed.join(run) as ranks:
        run.metric("rank", ranks.rank)
        run.metric("world_size", ranks.world_size)
        if hasattr(task, "seed"):  # data parallel: each rank its own batches
            task = replace(task, seed=ranks.rank)
        with run.phase(MODEL, setup=True):
            model = task.build(run.device, param_dtype(cfg))
            enable_checkpointing(model, cfg.checkpointing)
            model, opt = wrap(run, model, cfg, ranks)
        scaler = make_scaler(run.device, step_cfg.precision)
        for i in range(steps):
            x, y = get_batch(run, task, i, dtype=param_dtype(cfg))
            losses.append(train_step(run, model, opt, scaler, x, y, step_cfg, i, task.loss))
            if i == 0 and cfg.parallel == "fsdp":
                run.metric("fsdp_unsharded_block_bytes", distributed.fsdp_unsharded(run, model))
            del x, y
        if cfg.offload != "none" and hasattr(torch.cuda, "host_memory_stats"):
            # what the pinned host allocator holds (CUDA's counters; in sim its model's): every
            # block it owns, handed out or cached (the shards, the gradients' blocks)
            run.metric("pinned_held", torch.cuda.host_memory_stats().get("allocated_bytes.current", 0))
        if not run.simulated:
            run.metric("loss_first", run.item(losses[0]))
            run.metric("loss_last", run.item(losses[-1]))
        del model, opt
    return losses


__all__ = ["train_parallel", "wrap"]
