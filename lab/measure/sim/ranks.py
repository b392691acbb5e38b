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
- DTensor's sharding propagation of a foreach op: its inputs scanned for a _StridedShard once
  per op instead of once per output, and the strategy of each kind of element (the same input
  specs) expanded once instead of once per element;
- FSDP2's CPUOffloadPolicy: the shards, their gradients and the optimizer state leave the device
  (lab.measure.sim.kernels.fsdp_offload).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.distributed as dist

from ..distributed import Ranks, extrapolation_note
from ..torch_compat import (ddp_param_shape_check, disable_current_modes, dtensor_target,
                            fake_store, fsdp_chunk_target)
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
        with _ddp_in_sim(), _fsdp_in_sim(), _dtensor_in_sim(), _dtensor_foreach_in_sim(), \
                FsdpOffload(pinned_host):
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


@contextmanager
def _dtensor_in_sim():
    """DTensor's sharding propagation of a foreach op (torch 2.13) calls
    `_propagate_use_strided_shard_flag(child, op_schema)` once per output, and each call scans
    every input spec of the op for a _StridedShard: quadratic in the number of parameters (Adam's
    first step over FSDP2's sharded parameters: ~18 % of a lesson 22 FSDP variant in sim). Where
    no input has one the function returns having changed nothing, and that answer is the same
    for every child of one op: found once per op schema here, the full function otherwise."""
    target = dtensor_target("strided_flag")
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


# the foreach ops DTensor expands element by element (torch 2.13's single_dim_strategy.py)
FOREACH_PREFIXES = ("aten::_foreach_", "aten::_amp_foreach_", "aten::_fused_")


@contextmanager
def _dtensor_foreach_in_sim():
    """DTensor's sharding propagation of a foreach op (torch 2.13,
    `_expand_single_dim_strategy_to_mesh`) translates the op schema to each element and expands
    that element's strategy over the mesh: once per element, though the elements are mostly a
    few kinds (Adam's seven foreach ops over the ~340 sharded parameters of lesson 22's model,
    ~15 shapes: ~1 s of CPU, a third of an FSDP variant in sim). DTensor itself takes one
    element's expansion for any element whose per-element schema is equal (its lru_cache on
    that schema returns the first one's function, which reads only the first one's schema);
    here the op is expanded over one element of each kind and every element gets its kind's
    strategy (shared: what reads it after only reads it, and the _StridedShard fix-up, which
    writes, is left to the full function: an op with a _StridedShard input is not shortened)."""
    target = dtensor_target("foreach_expand")
    flag = dtensor_target("strided_flag")
    if target is None or flag is None:  # a torch without them
        yield
        return
    owner, name, tuple_strategy = target
    strided_shard = flag[2]
    full = getattr(owner, name)

    def once_per_kind(mesh, op_schema, strategy_info, output_meta):
        kinds = _element_kinds(op_schema, output_meta, tuple_strategy, strided_shard)
        if kinds is None:
            return full(mesh, op_schema, strategy_info, output_meta)
        firsts, of = kinds
        args = tuple(tuple_strategy([a.children[i] for i in firsts])
                     if isinstance(a, tuple_strategy) else a for a in op_schema.args_schema)
        fewer = type(op_schema)(op_schema.op, args, op_schema.kwargs_schema,
                                schema_info=op_schema.schema_info)
        expand = full(mesh, fewer, strategy_info,
                      None if output_meta is None else [output_meta[i] for i in firsts])

        def expanded(op, args_schema, kwargs_schema):
            got = expand(op, fewer.args_meta, fewer.kwargs_meta).children
            return tuple_strategy([got[k] for k in of])

        return expanded

    setattr(owner, name, once_per_kind)
    try:
        yield
    finally:
        setattr(owner, name, full)


def _element_kinds(op_schema, output_meta, tuple_strategy, strided_shard
                   ) -> tuple[list[int], list[int]] | None:
    """(the first element of each kind, each element's kind) of a foreach op whose elements
    repeat; None for any other op (not a foreach op over tensor lists, every element its own
    kind, a _StridedShard input, inputs that do not hash), which DTensor expands as it does.
    An element's kind: its input strategies (equal as DTensor compares them: mesh, placements,
    shard order, shape, stride, dtype) and its output's metadata."""
    lists = [a for a in op_schema.args_schema if isinstance(a, tuple_strategy)]
    if not lists or not op_schema.op.name().startswith(FOREACH_PREFIXES):
        return None
    n = len(lists[0].children)
    if any(len(a.children) != n for a in lists) or (output_meta is not None
                                                   and len(output_meta) != n):
        return None  # DTensor's own error, raised where it raises it
    first: dict = {}
    try:
        of = [first.setdefault((*(a.children[i] for a in lists),
                                None if output_meta is None else output_meta[i]), len(first))
              for i in range(n)]
    except TypeError:  # unhashable (symbolic sizes): DTensor's own cache skips them too
        return None
    inputs = [*op_schema.args_schema, *(s for kind in first for s in kind[:-1])]
    if len(first) == n or any(_strided(s, strided_shard) for s in inputs):
        return None
    return [of.index(k) for k in range(len(first))], of


def _strided(strategy, strided_shard) -> bool:
    """Does an input strategy (DTensor's OpStrategy) place a _StridedShard anywhere?"""
    for op_spec in getattr(strategy, "strategies", ()):
        specs = op_spec.output_specs
        for spec in specs if isinstance(specs, (tuple, list)) else (specs,):
            if spec is not None and any(isinstance(p, strided_shard) for p in spec.placements):
                return True
    return False


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
