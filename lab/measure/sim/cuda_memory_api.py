"""torch.cuda's allocator API in sim: the calls an experiment makes reach the allocator model.

An experiment about the allocator is plain PyTorch (`torch.cuda.memory_stats()`,
`torch.cuda.memory_snapshot()`, `torch.cuda.mem_get_info()`, `torch.cuda.empty_cache()`,
`torch.cuda.memory._set_allocator_settings(...)`, `torch.cuda.set_per_process_memory_fraction`);
on the CPU build sim runs on, those would
answer nothing or fail. Inside sim they answer from the model (lab.measure.sim.allocator_view):
the same keys, the same segments, the model's numbers. `mem_get_info` answers (total - reserved,
total) for the model's GPU: a real GPU's free memory is also short of the CUDA context (about
1.2 GB on the H200, lesson 17), which sim does not have; and, as on a GPU, it ignores
`set_per_process_memory_fraction`.
"""

from __future__ import annotations

import torch

from .allocator_view import memory_snapshot, memory_stats


class CudaMemoryApi:
    def __init__(self, allocator):
        self.allocator = allocator  # lab.measure.sim.allocator_replay.Replay, or None
        self._saved: list[tuple[object, str, object]] = []

    # ---- what the patched functions answer ---------------------------------------------------
    def empty_cache(self) -> None:
        if self.allocator is not None:
            self.allocator.empty_cache()

    def set_allocator_settings(self, settings: str) -> None:
        """PYTORCH_CUDA_ALLOC_CONF-style "key:value,..." (lab.measure.sim.allocator_settings)."""
        if self.allocator is not None:
            self.allocator.set_settings(settings)

    def memory_stats(self, device=None) -> dict[str, int]:
        return memory_stats(self.allocator.model) if self.allocator is not None else {}

    def memory_snapshot(self, *args, **kwargs) -> list[dict]:
        return memory_snapshot(self.allocator.model) if self.allocator is not None else []

    def set_per_process_memory_fraction(self, fraction: float, device=None) -> None:
        """A cap set at run time, as `allowed_memory_maximum = fraction x total` is."""
        if not 0 <= fraction <= 1:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 1].")
        if self.allocator is not None:
            m = self.allocator.model
            m.cap = int(fraction * m.total)

    def mem_get_info(self, device=None) -> tuple[int, int]:
        if self.allocator is None:
            raise RuntimeError("sim: no allocator model for this run")
        m = self.allocator.model
        return m.total - m.stats.reserved, m.total

    # ---- install / uninstall ---------------------------------------------------------------
    def install(self) -> None:
        mem = torch.cuda.memory
        for owner in (torch.cuda, mem):
            self._patch(owner, "empty_cache", self.empty_cache)
            # memory_allocated / memory_reserved / max_memory_* read memory_stats through the
            # module's globals: patching torch.cuda.memory.memory_stats answers them too
            self._patch(owner, "memory_stats", self.memory_stats)
            self._patch(owner, "memory_snapshot", self.memory_snapshot)
            self._patch(owner, "mem_get_info", self.mem_get_info)
            self._patch(owner, "set_per_process_memory_fraction", self.set_per_process_memory_fraction)
        self._patch(mem, "_set_allocator_settings", self.set_allocator_settings)
        self._patch(torch._C, "_accelerator_setAllocatorSettings", self.set_allocator_settings)

    def _patch(self, owner, name: str, fn) -> None:
        if hasattr(owner, name):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, fn)

    def uninstall(self) -> None:
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved.clear()


__all__ = ["CudaMemoryApi"]
