"""Many ranks in one process: sim's side of torch.distributed (lab.measure.distributed).

sim simulates the ranks of a run in ONE process with PyTorch's fake process group
(`torch.testing._internal.distributed.fake_pg`): this process is rank 0 (or `sim_rank`) of
`world_size` ranks, collectives move no data, and every tensor a rank would hold is a fake tensor
of the right size, so a laptop answers "what does each of 1024 GPUs hold" in seconds. The sim
backend enters `simulated_ranks` where lab.measure.distributed.join would join a real group.

What sim changes, all here:
- the device mesh and the fake group are built with the dispatch modes off (under FakeTensorMode
  `init_device_mesh` fails: `rank_map.tolist()` has no data to read);
- DDP: its constructor's parameter-shape check writes into a tensor, so it runs with the modes
  off; the fake group's all-reduce returns no tensor, which the reducer asserts on (c10d
  comm.cpp), so a comm hook does what DDP's default hook does (lab.measure.ddp);
- FSDP2 splits every parameter into N chunks to keep two of them (its rank's and the first,
  padded one): sim makes only the chunks asked for, the same tensors, without N fake ops per
  parameter (at N = 1024 those took minutes);
- DTensor's sharding propagation of a foreach op (Adam's over FSDP2's shards), found once per
  kind of element instead of once per element (lab.measure.sim.dtensor);
- FSDP2's CPUOffloadPolicy: the shards, their gradients and the optimizer state leave the device
  (lab.measure.sim.kernels.fsdp_offload).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.distributed as dist

from ..distributed import Ranks, extrapolation_note
from ..torch_compat import (ddp_param_shape_check, disable_current_modes, fake_store,
                            fsdp_chunk_target)
from .dtensor import foreach_shortcuts
from .kernels.fsdp_offload import FsdpOffload


@contextmanager
def simulated_ranks(run, world_size: int, device_type: str, pinned_host: Any = None
                    ) -> Iterator[Ranks]:
    """Be rank `run.p.sim_rank` (default 0) of `world_size` in the fake process group, torn down
    on exit (in-process sim runs, such as `memlab fit`'s probes, follow one another).
    `pinned_host`: the pinned host allocator's model FSDP2's CPU offload counts in."""
    rank = int(getattr(run.p, "sim_rank", 0))
    if not 0 <= rank < world_size:
        raise ValueError(f"sim_rank {rank} is not a rank of {world_size}")
    with disable_current_modes():
        if dist.is_initialized():  # a run before this one in this process did not finish
            dist.destroy_process_group()
        dist.init_process_group("fake", store=fake_store(), rank=rank, world_size=world_size)
    note = extrapolation_note(world_size)
    if note:
        run.note(f"sim: {note}.")
    try:
        with _ddp_in_sim(), _fsdp_in_sim(), foreach_shortcuts(), FsdpOffload(pinned_host):
            yield Ranks(rank, world_size, True, device_type)
    finally:
        with disable_current_modes():
            dist.destroy_process_group()


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


__all__ = ["simulated_ranks"]
