"""`AllocatorCounters`: the caching allocator's counters, one type for every mode.

Measured on CUDA (`torch.cuda.memory_stats()`, lab.measure.cuda_allocator.memory_stats), kept by sim's
model of the allocator as it runs (lab.measure.sim.allocator.model.Stats extends it with the model's
own counts), and what a replay finishes with (lab.measure.sim.allocator.replay.ReplayResult).
A result stores them as `AllocatorStats` (lab.measure.result: the JSON contract). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

# memory_stats() keys, as torchtitan's metrics name them too
KEYS = {"allocated": "allocated_bytes.all.current", "peak_allocated": "allocated_bytes.all.peak",
        "reserved": "reserved_bytes.all.current", "peak_reserved": "reserved_bytes.all.peak",
        "num_alloc_retries": "num_alloc_retries", "num_ooms": "num_ooms"}


@dataclass
class AllocatorCounters:
    allocated: int = 0  # memory_allocated(): bytes in blocks handed out (512 B rounded)
    reserved: int = 0  # memory_reserved(): bytes in segments (cudaMalloc'd or mapped)
    peak_allocated: int = 0  # max_memory_allocated()
    peak_reserved: int = 0  # max_memory_reserved()
    num_alloc_retries: int = 0  # cache flushes before a cudaMalloc was tried again
    num_ooms: int = 0

    @classmethod
    def from_memory_stats(cls, stats: Mapping[str, int]) -> AllocatorCounters:
        """From `torch.cuda.memory_stats()`'s dict (missing keys read as 0)."""
        return cls(**{name: int(stats.get(key, 0)) for name, key in KEYS.items()})

    def as_memory_stats(self) -> dict[str, int]:
        """These counters under memory_stats()'s keys."""
        return {key: getattr(self, name) for name, key in KEYS.items()}


__all__ = ["AllocatorCounters", "KEYS"]
