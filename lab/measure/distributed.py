"""torch.distributed in the lab: the ranks a run is one of, real or simulated.

cuda / cpu: the runner starts one worker per rank, the way torchrun does (lab/runner/group.py),
and the worker joins the group (nccl / gloo) before the experiment runs; every rank is measured
on its own. sim: the ranks are simulated in ONE process with PyTorch's fake process group
(`torch.testing._internal.distributed.fake_pg`): this process is rank 0 (or `sim_rank`) of
`world_size` ranks, collectives move no data, and every tensor a rank would hold is a fake tensor
of the right size, so a laptop answers "what does each of 1024 GPUs hold" in seconds.

The experiment code is the same in every mode (`with join(run): ...`); what sim changes is
named here and nowhere else:
- the device mesh and the fake group are built with the dispatch modes off (under FakeTensorMode
  `init_device_mesh` fails: `rank_map.tolist()` has no data to read);
- DDP: its constructor's parameter-shape check writes into a tensor, so it runs with the modes
  off; the fake group's all-reduce returns no tensor, which the reducer asserts on (c10d
  comm.cpp), so a comm hook does what DDP's default hook does — divide the bucket in place and
  all-reduce it — and returns the bucket; and the reducer keeps its first-iteration bucket
  layout (rebuilding reads bucket indices from a tensor): the same bytes (one bucket of the
  whole model instead of ~25 MB ones), so peaks match, and the allocator model is told of the
  rebuilt layout, so its segments match too (lab.measure.ddp);
- FSDP2 splits every parameter into N chunks to keep two of them (its rank's and the first,
  padded one): sim makes only the chunks asked for — the same tensors, without N fake ops per
  parameter (at N = 1024 those took minutes);
- FSDP2's CPUOffloadPolicy: the shards, their gradients and the optimizer state leave the device
  (host tensors are meta tensors, pinned bytes go to the pinned-host model), and each block's
  shards are copied back to the device before its all-gather (lab.measure.sim.fsdp_offload).
Above the rank counts the lab has measured on real GPUs (`VALIDATED_RANKS`), a simulated result
is rank 0 extrapolated: it leaves out NCCL's own buffers and the CUDA context (neither is in
PyTorch's allocator), and ranks that hold different shards (ZeRO-1) may differ from rank 0.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
from .torch_compat import (ddp_param_shape_check, disable_current_modes,
                           dtensor_strided_flag_target, fake_store, fsdp_chunk_target)

# rank counts measured on real GPUs (two H200s, issue 13); issue 16 adds 4 and 8
VALIDATED_RANKS = (1, 2)


def extrapolation_note(world_size: int) -> str | None:
    """What a simulated result of `world_size` ranks cannot know, or None within what was measured."""
    if world_size in VALIDATED_RANKS:
        return None
    measured = ", ".join(str(n) for n in VALIDATED_RANKS if n > 1)
    return (f"{world_size} ranks is a rank-0 extrapolation (the lab has measured {measured} "
            "GPUs): it leaves out NCCL's buffers and the CUDA context, and ranks holding "
            "different shards may differ from rank 0")


@dataclass(frozen=True)
class Ranks:
    rank: int
    world_size: int
    simulated: bool  # sim: the fake process group in this one process
    device_type: str  # what the device mesh and the collectives run on: cuda | cpu


@contextmanager
def join(run) -> Iterator[Ranks]:
    """Be one rank of `run.p.world_size` (default 1) for the code inside.

    Real ranks: the group the runner started (its size must be world_size). One rank on cpu or
    cuda without a runner group: a group of one (gloo / nccl on a local store), so DDP and FSDP2
    run unchanged. sim: the fake process group, torn down on exit (in-process sim runs, such as
    `memlab fit`'s probes, follow one another).
    """
    n = int(getattr(run.p, "world_size", 1))
    if n < 1:
        raise ValueError(f"world_size must be 1 or more, not {n}")
    device_type = "cuda" if run.is_cuda else "cpu"
    if run.simulated:
        rank = int(getattr(run.p, "sim_rank", 0))
        if not 0 <= rank < n:
            raise ValueError(f"sim_rank {rank} is not a rank of {n}")
        with disable_current_modes():
            if dist.is_initialized():  # a run before this one in this process did not finish
                dist.destroy_process_group()
            dist.init_process_group("fake", store=fake_store(), rank=rank, world_size=n)
        note = extrapolation_note(n)
        if note:
            run.note(f"sim: {note}.")
        try:
            from .sim.fsdp_offload import FsdpOffload

            pinned = getattr(run.backend, "pinned_host", None)
            with _ddp_in_sim(), _fsdp_in_sim(), _dtensor_in_sim(), FsdpOffload(pinned):
                yield Ranks(rank, n, True, device_type)
        finally:
            with disable_current_modes():
                dist.destroy_process_group()
        return
    if dist.is_initialized():
        if dist.get_world_size() != n:
            raise ValueError(f"this run has {dist.get_world_size()} ranks but world_size is {n}: "
                             "start it with as many ranks (memlab run --gpus N)")
        yield Ranks(dist.get_rank(), n, False, device_type)
        return
    if n != 1:
        raise ValueError(f"world_size {n} needs {n} ranks, one process each: start the run "
                         f"with --gpus {n} (or simulate it: --mode sim)")
    with disable_current_modes():
        dist.init_process_group("nccl" if run.is_cuda else "gloo", store=dist.HashStore(),
                                rank=0, world_size=1)
    try:
        yield Ranks(0, 1, False, device_type)
    finally:
        with disable_current_modes():
            dist.destroy_process_group()


def device_mesh(ranks: Ranks):
    """The 1-D mesh FSDP2 shards over, built with the dispatch modes off (see the docstring)."""
    from torch.distributed.device_mesh import init_device_mesh

    with disable_current_modes():
        return init_device_mesh(ranks.device_type, (ranks.world_size,))


@contextmanager
def _ddp_in_sim():
    """DDP's constructor checks parameter shapes across ranks by writing them into a tensor:
    under FakeTensorMode there is nothing to write into, so the check runs with modes off."""
    owner, name = ddp_param_shape_check()
    check = getattr(owner, name)

    def verify(*args, **kwargs):
        with disable_current_modes():
            return check(*args, **kwargs)

    setattr(owner, name, verify)
    try:
        yield
    finally:
        setattr(owner, name, check)


@contextmanager
def _fsdp_in_sim():
    """FSDP2's `_chunk_with_empty`, made lazy: chunk k is built when asked for (see the
    docstring); what it returns for any k is what `torch.chunk` + empty padding would."""
    target = fsdp_chunk_target()
    if target is None:  # a torch without it: nothing to speed up
        yield
        return
    owner, name = target
    eager = getattr(owner, name)
    setattr(owner, name, _LazyChunks)
    try:
        yield
    finally:
        setattr(owner, name, eager)


@contextmanager
def _dtensor_in_sim():
    """DTensor's sharding propagation of a foreach op (torch 2.13) calls
    `_propagate_use_strided_shard_flag(child, op_schema)` once per output, and each call scans
    every input spec of the op for a _StridedShard: quadratic in the number of parameters (Adam's
    first step over FSDP2's sharded parameters: ~18 % of a lesson 22 FSDP variant in sim). Where
    no input has one the function returns having changed nothing, and that answer is the same
    for every child of one op: found once per op schema here, the full function otherwise."""
    target = dtensor_strided_flag_target()
    if target is None:  # a torch without it
        yield
        return
    owner, name, strided_shard = target
    full = getattr(owner, name)
    last: list = [None, True]  # the op schema last asked about; has an input a _StridedShard?

    def propagate(op_strategy, op_schema):
        if last[0] is not op_schema:  # held here, so its id is not another schema's
            last[0] = op_schema
            last[1] = any(isinstance(p, strided_shard)
                          for spec in op_schema.args_spec for p in spec.placements)
        if last[1]:
            full(op_strategy, op_schema)

    setattr(owner, name, propagate)
    try:
        yield
    finally:
        setattr(owner, name, full)
        last.clear()


class _LazyChunks:
    """`list(torch.chunk(tensor, n, dim))`, padded with empty tensors to n, built on demand."""

    def __init__(self, tensor: torch.Tensor, num_chunks: int, dim: int):
        self.tensor, self.n, self.dim = tensor, num_chunks, dim
        size = tensor.size(dim)
        self.cache: dict[int, torch.Tensor] = {}
        if not size:  # nothing to split: as torch.chunk does it (no cost to save)
            self.cache = dict(enumerate(torch.chunk(tensor, num_chunks, dim)))
        self.step = -(-size // num_chunks)  # torch.chunk's chunk size
        self.made = -(-size // self.step) if size else len(self.cache)  # chunks it makes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> torch.Tensor:
        k = range(self.n)[k]
        if k not in self.cache:
            if k < self.made:
                start = k * self.step
                length = min(self.step, self.tensor.size(self.dim) - start)
                self.cache[k] = self.tensor.narrow(self.dim, start, length)
            else:
                self.cache[k] = self[0].new_empty(0)
        return self.cache[k]

    def __iter__(self):
        return (self[k] for k in range(self.n))


# ---- FSDP2: the unsharded parameters, named ----------------------------------------------------
def fsdp_unsharded(run, model) -> int:
    """Label FSDP2's all-gather outputs — each block's unsharded parameters, allocated before
    its forward (and backward) and resized to nothing after — as "parameters"; returns the bytes
    of the largest block's. Call after the first forward (they are made lazily)."""
    largest = 0
    for module in model.modules():
        state = getattr(module, "_get_fsdp_state", None)  # FSDP2's private state: feature-detected
        group = getattr(state(), "_fsdp_param_group", None) if state is not None else None
        if group is None:
            continue
        size = 0
        for p in getattr(group, "fsdp_params", ()):
            for t in getattr(p, "all_gather_outputs", ()):
                run.mark(t, "parameters")
                size += t.numel() * t.element_size()
        largest = max(largest, size)
    return largest
