"""Lesson 22: one model trained on `world_size` GPUs — DDP, ZeRO-1, FSDP2 — measured rank by rank.

Every rank runs this same file (the lab starts one process per rank, as torchrun does; in sim
the ranks are simulated in one process with PyTorch's fake process group). Each rank trains on
its own batch of `batch` sequences; what a rank holds depends on the strategy
(lab/workloads/parallel.py has the code, in the words of PyTorch's docs):

    DDP      model = DistributedDataParallel(model)
             opt = torch.optim.AdamW(model.parameters(), ...)
    ZeRO-1   model = DistributedDataParallel(model)
             opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, ...)
    FSDP2    mesh = init_device_mesh("cuda", (world_size,))
             for block in model.model.layers:
                 fully_shard(block, mesh=mesh)              # + mp_policy=MixedPrecisionPolicy(...)
             fully_shard(model, mesh=mesh)
             opt = torch.optim.AdamW(model.parameters(), ...)   # over the shards (DTensors)
    + offload    fully_shard(..., offload_policy=CPUOffloadPolicy())   # shards in pinned host
                 memory, the optimizer on the CPU (simulated only: not recorded on GPUs)

then the usual loop: loss = model(x); loss.backward(); opt.step(); opt.zero_grad().
"""

from dataclasses import replace

from lab.workloads import TrainConfig
from lab.workloads.registry import layout
from lab.workloads.tasks import LM
from lab.workloads.train import train


def model_layout(run):
    """Qwen2-1.5B at seed scale; the same layout shrunk (2 layers, 128 wide) at small scale."""
    return replace(layout(run.p.layout), n_layer=run.p.layers, n_embd=run.p.hidden, d_ff=run.p.ff,
                   n_head=run.p.heads, n_kv_head=run.p.kv_heads, vocab_size=run.p.vocab)


def run_with(run, parallel, **config):
    task = LM(model_layout(run), run.p.batch, run.p.seq)  # per rank: its own batch
    train(run, task, TrainConfig(parallel=parallel, **config), run.p.steps)


def baseline(run):  # DDP: a full replica per rank
    run_with(run, "ddp")


def zero1(run):  # DDP + ZeroRedundancyOptimizer: the optimizer state split across ranks
    run_with(run, "zero1")


def fsdp(run):  # FSDP2: parameters, gradients and optimizer state split across ranks
    run_with(run, "fsdp")


def fsdp_bf16(run):  # FSDP2 + MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)
    run_with(run, "fsdp", precision="bf16")


def fsdp_ckpt(run):  # FSDP2 + activation checkpointing per block
    run_with(run, "fsdp", checkpointing="blocks")


def fsdp_offload(run):  # FSDP2 + CPUOffloadPolicy(): shards, gradients, AdamW state on the host
    run_with(run, "fsdp", offload="cpu")
