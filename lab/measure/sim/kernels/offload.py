"""Offloading saved tensors to pinned host memory, as CUDA does it, in sim.

`torch.autograd.graph.save_on_cpu(pin_memory=True)` packs every tensor autograd saves into a
pinned host copy (forward: device -> host) and unpacks it into a new device tensor when backward
needs it (host -> device). transformers' `activation_checkpointing_enable(offload=True)` wraps
each checkpointed layer in it. In sim the "device" is the CPU, so the real hook would copy a
fake tensor to the same device and save nothing; sim's hook does what CUDA's does to device
memory instead: the saved tensor leaves the device (its host copy is a meta tensor, which the
tracker does not count), and backward gets a new device tensor of the same size.

The host side is a model of PyTorch's pinned-memory allocator (CachingHostAllocator,
aten/src/ATen/core/CachingHostAllocator.h, stored copies of torch 2.x; rules, not code): every
request is rounded up to a power of two; a freed block is cached in the free list of its size
and reused by a request of that rounded size; cached blocks stay pinned until
`torch._C._host_emptyCache()`. `torch.cuda.host_memory_stats()` answers from it in sim:
`allocated_bytes` = pinned blocks the allocator owns (live and cached), `active_bytes` = those
handed out. Not modelled: a freed block waits for the copies recorded on it to finish (sim
assumes they have), `pin_memory=False` (pageable copies: not counted on a GPU either).
"""

from __future__ import annotations

import sys
import weakref
from collections import Counter

import torch
from torch.autograd.graph import saved_tensors_hooks

from ..patches import Swaps

_TRANSFORMERS = "transformers.modeling_utils"


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class PinnedHostModel:
    def __init__(self):
        self.cached: Counter[int] = Counter()  # rounded size -> free blocks of that size
        self.owned = self.owned_peak = self.active = self.active_peak = 0
        self.blocks = self.num_host_alloc = 0

    def alloc(self, nbytes: int) -> int:
        size = _pow2(nbytes)
        if self.cached[size]:
            self.cached[size] -= 1
        else:
            self.owned += size
            self.blocks += 1
            self.num_host_alloc += 1
            self.owned_peak = max(self.owned_peak, self.owned)
        self.active += size
        self.active_peak = max(self.active_peak, self.active)
        return size

    def release(self, size: int) -> None:
        self.active -= size
        self.cached[size] += 1

    def pin(self, copy: torch.Tensor) -> None:
        """`copy` (a host tensor: meta in sim) is held in a pinned block for as long as it lives."""
        weakref.finalize(copy, self.release, self.alloc(copy.numel() * copy.element_size()))

    def pinned_like(self, t: torch.Tensor) -> torch.Tensor:
        """A pinned host buffer of `t`'s shape and dtype (`torch.empty(..., pin_memory=True)` in
        a run's own offload code): a meta tensor here, counted in this model while it lives."""
        copy = torch.empty(t.size(), dtype=t.dtype, device="meta")
        self.pin(copy)
        return copy

    def stats(self) -> dict[str, int]:
        return {"allocated_bytes.current": self.owned, "allocated_bytes.peak": self.owned_peak,
                "active_bytes.current": self.active, "active_bytes.peak": self.active_peak,
                "allocations.current": self.blocks, "num_host_alloc": self.num_host_alloc}


def sim_save_on_cpu(host: PinnedHostModel):
    """A `save_on_cpu` class for sim whose pinned copies are counted in `host`."""

    class save_on_cpu(saved_tensors_hooks):  # noqa: N801  (the name PyTorch's class has)
        def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
            def pack(t: torch.Tensor):
                copy = torch.empty(t.size(), dtype=t.dtype, layout=t.layout, device="meta")
                if pin_memory:
                    host.pin(copy)  # freed with the autograd graph
                return t.device, copy

            def unpack(packed):
                device, copy = packed
                return torch.empty(copy.size(), dtype=copy.dtype, layout=copy.layout, device=device)

            super().__init__(pack, unpack)

    return save_on_cpu


class CudaOffload:
    """Installs sim's `save_on_cpu` (torch and transformers' import of it) and
    `torch.cuda.host_memory_stats`."""

    def __init__(self):
        self.host = PinnedHostModel()
        self.cls = sim_save_on_cpu(self.host)
        self._swaps = Swaps()
        self._transformers = False

    def install(self) -> None:
        self._swaps.replace(torch.autograd.graph, "save_on_cpu", self.cls)
        for owner in (torch.cuda, torch.cuda.memory):
            self._swaps.replace(owner, "host_memory_stats", lambda: self.host.stats())
        self.maybe_patch()

    def maybe_patch(self) -> None:
        """Cheap to call often: transformers' own reference, once it is imported."""
        if self._transformers or _TRANSFORMERS not in sys.modules:
            return
        self._transformers = True
        self._swaps.replace(sys.modules[_TRANSFORMERS], "save_on_cpu", self.cls)

    def uninstall(self) -> None:
        self._swaps.restore()
        self._transformers = False


__all__ = ["CudaOffload", "PinnedHostModel", "sim_save_on_cpu"]
