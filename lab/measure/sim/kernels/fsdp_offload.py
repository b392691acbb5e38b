"""FSDP2's `CPUOffloadPolicy` in sim: what CUDA does to device memory, through FSDP2's own code.

With `fully_shard(module, offload_policy=CPUOffloadPolicy(pin_memory=...))`, FSDP2 (torch 2.13,
torch/distributed/fsdp/_fully_shard/) keeps each sharded parameter on the host and moves data at
three places:
- `FSDPParam._init_sharded_param` (_fsdp_param.py): the padded shard, made on the device, is
  copied to the host (`.cpu()`) and, with pin_memory, into pinned memory (`.pin_memory()`); the
  device copy is freed when `fully_shard` returns;
- `FSDPParam.all_gather_inputs` (_fsdp_param.py): before each all-gather, each shard is copied
  to the device (`.to(self.device, non_blocking=True)`), copied into the all-gather's flat input
  and freed;
- `foreach_reduce` (_fsdp_collectives.py): each reduce-scattered gradient shard is copied to the
  host (`.to(torch.device("cpu"), non_blocking=...)`: pinned when non_blocking, as ATen's
  `_to_copy` pins a non-blocking device-to-host copy: `pin_out` in
  aten/src/ATen/native/TensorConversions.cpp), and the device buffer is freed.
The optimizer then steps on the host: its state and its temporaries never touch the GPU.

Sim's fake tensors live on the CPU (lab/measure/backends/sim.py says why), so there `.cpu()` is a
no-op, `.pin_memory()` is not implemented for fake tensors, and every shard would stay counted as
GPU memory: the offloaded run's peak was the plain run's to the byte. As in
lab/measure/sim/kernels/offload.py (save_on_cpu), a host tensor in sim is a *meta* tensor of the
same size: the tracker does not count it, and every op on host tensors only (the optimizer's
step, zero_grad) makes meta tensors, so the whole host side stays out of the GPU's count with no
rule of its own. Its pinned bytes are counted in the pinned-host model (`PinnedHostModel`,
CachingHostAllocator's rules), which `torch.cuda.host_memory_stats()` answers from.

The mechanism, the smallest that lets FSDP2's own code make every move: while (and only while)
the two functions that move data to the host run for an offloading parameter
(`FSDPParam._init_sharded_param`, `foreach_reduce`), a TorchFunctionMode (`HostMoves`) answers
their `.cpu()`, `.to(<cpu>)` and `.pin_memory()` of a device tensor with a host (meta) copy,
pinned where CUDA pins it. Inside those two functions a CPU target means the host and nothing
else (the compute device is always `self.device`). The copy to the device before each
all-gather needs nothing: `.to(self.device)` of a meta shard is a new fake device tensor,
counted and freed as on the GPU. Two checks of FSDP2's lazy init read the device of the shards
(`_validate_no_meta_params`, `_validate_cpu_offload_params`): they run over the parameters sim
did not move (sim's host shards are meta by construction, CPU-resident on the GPU). Nothing is
patched for a run without an offload policy.

Not modelled: the pageable host copy `.cpu()` makes before `.pin_memory()` (host memory, not
pinned: freed at once), pageable host memory in general (the optimizer state, gradients copied
without pinning), and the time the copies take.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ... import torch_compat
from ..patches import Swaps
from .offload import PinnedHostModel

_TO, _CPU, _PIN = torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.pin_memory


def _host_copy(t: torch.Tensor, pinned: bool, host: PinnedHostModel | None) -> torch.Tensor:
    """`t` copied to the host: a meta tensor of its size and strides (not GPU memory); its
    bytes pinned in `host` for as long as it lives when `pinned`."""
    copy = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device="meta")
    if pinned and host is not None:
        host.pin(copy)
    return copy


def _on_host(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "meta"


class HostMoves(TorchFunctionMode):
    """FSDP2's moves to the host, as CUDA makes them: `.cpu()` (pageable), `.to(cpu,
    non_blocking=True)` (pinned, as `_to_copy` pins a non-blocking copy to the host),
    `.to(cpu)` (pageable), `.pin_memory()` (pinned)."""

    def __init__(self, host: PinnedHostModel | None):
        super().__init__()
        self.host = host

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _CPU and not _on_host(args[0]):
            return _host_copy(args[0], False, self.host)
        if func is _PIN:  # a new pinned copy (FSDP2 pins the host copy `.cpu()` made)
            return _host_copy(args[0], True, self.host)
        if func is _TO and not _on_host(args[0]):
            device, dtype, non_blocking = torch_compat.parse_to(*args[1:], **kwargs)
            to_host = device is not None and torch.device(device).type == "cpu"
            if to_host and dtype in (None, args[0].dtype):
                return _host_copy(args[0], bool(non_blocking), self.host)
        return func(*args, **kwargs)


class FsdpOffload:
    """Installs the two wrapped FSDP2 functions and the two lazy-init checks (see the docstring);
    `host`: the run's pinned-host model. A context manager; a torch without these names
    (`torch_compat.fsdp_offload_targets()` is None) changes nothing."""

    def __init__(self, host: PinnedHostModel | None):
        self.host = host
        self.moved: weakref.WeakSet = weakref.WeakSet()  # FSDPParams sim put on the host
        self._swaps = Swaps()

    def __enter__(self) -> FsdpOffload:
        targets = torch_compat.fsdp_offload_targets()
        if targets is None:
            return self
        fsdp_param_cls, group_module, group_cls = targets
        init = fsdp_param_cls._init_sharded_param
        reduce = group_module.foreach_reduce
        moved, host = self.moved, self.host

        def _init_sharded_param(fsdp_param, *args, **kwargs):
            if not fsdp_param.offload_to_cpu:
                return init(fsdp_param, *args, **kwargs)
            with HostMoves(host):
                out = init(fsdp_param, *args, **kwargs)
            if _on_host(fsdp_param._sharded_param_data):
                moved.add(fsdp_param)
            return out

        def foreach_reduce(fsdp_params, *args, **kwargs):
            if not any(p in moved for p in fsdp_params):
                return reduce(fsdp_params, *args, **kwargs)
            with HostMoves(host):
                return reduce(fsdp_params, *args, **kwargs)

        self._swaps.replace(fsdp_param_cls, "_init_sharded_param", _init_sharded_param)
        self._swaps.replace(group_module, "foreach_reduce", foreach_reduce)
        for name in ("_validate_no_meta_params", "_validate_cpu_offload_params"):
            self._swaps.replace(group_cls, name, self._without_moved(getattr(group_cls, name)))
        return self

    def _without_moved(self, check):
        """`check(group)` over the parameters sim did not move to the host."""
        moved = self.moved

        def validate(group):
            everything = group.fsdp_params
            group.fsdp_params = [p for p in everything if p not in moved]
            try:
                return check(group)
            finally:
                group.fsdp_params = everything

        return validate

    def __exit__(self, *exc) -> None:
        self._swaps.restore()


__all__ = ["FsdpOffload", "HostMoves"]
