"""`CpuBackend`: a real run on this machine's CPU; every storage counted exactly.

A virtual GPU (`--gpu-memory`) is a capacity the tracker enforces: an allocation that would
take the live bytes past it raises an out-of-memory error worded like PyTorch's.
"""

from __future__ import annotations

from typing import Hashable

import torch

from ..result import DeviceInfo
from ..tracker import TensorTracker
from .base import Backend


class VirtualOutOfMemory(torch.OutOfMemoryError):
    """Raised when a virtual GPU's capacity would be exceeded (cpu mode)."""


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def oom_message(requested: int, capacity: int, live: int) -> str:
    """Shaped like the real CUDA caching allocator's message, so the OOM lesson reads the same."""
    free = max(0, capacity - live)
    return (
        f"CUDA out of memory. Tried to allocate {_gib(requested)}. GPU 0 has a total capacity of "
        f"{_gib(capacity)} of which {_gib(free)} is free. Of the allocated memory {_gib(live)} is "
        f"allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. "
        f"(virtual GPU of {_gib(capacity)} enforced by memlab's tensor tracker)"
    )


class CapacityGuard:
    """A storage observer that acts as a GPU of `capacity` bytes (no allocator: tensor bytes)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.live = 0
        self._sizes: dict[Hashable, int] = {}

    def alloc(self, key: Hashable, nbytes: int) -> None:
        if self.live + nbytes > self.capacity:
            raise VirtualOutOfMemory(oom_message(nbytes, self.capacity, self.live))
        self._sizes[key] = nbytes
        self.live += nbytes

    def free(self, key: Hashable) -> None:
        self.live -= self._sizes.pop(key, 0)


class CpuBackend(Backend):
    name = "cpu"

    def device_info(self) -> DeviceInfo:
        return DeviceInfo("CPU", "cpu", self.gpu_memory, self.gpu_memory)

    def new_tracker(self) -> TensorTracker:
        guard = [CapacityGuard(self.gpu_memory)] if self.gpu_memory else []
        return TensorTracker(observers=guard)


__all__ = ["CapacityGuard", "CpuBackend", "VirtualOutOfMemory", "oom_message"]
