"""torch.cuda's allocator API in sim: the calls an experiment makes reach the allocator model.

An experiment about the allocator is plain PyTorch (`torch.cuda.memory_stats()`,
`torch.cuda.memory_snapshot()`, `torch.cuda.mem_get_info()`,
`torch.cuda.set_per_process_memory_fraction()`); on the CPU build sim runs on, those would
answer nothing or fail. Inside a sim run they answer from the model
(lab.measure.sim.allocator_view): the same keys, the same segments, the model's numbers.
`mem_get_info` answers (total - reserved, total) for the model's GPU: a real GPU's free memory
is also short of the CUDA context (about 1.2 GB on the H200, lesson 17), which sim does not
have; and, as on a GPU, it ignores `set_per_process_memory_fraction`. Patching
torch.cuda.memory.memory_stats also answers memory_allocated / memory_reserved /
max_memory_*, which read it through their module's globals. Peaks are the run's:
reset_peak_memory_stats is not routed. (empty_cache and the settings: lab.measure.sim.backend.)
"""

from __future__ import annotations

import torch

from .allocator_view import memory_snapshot, memory_stats
from .patches import Patch


def memory_api_patches(allocator) -> list[Patch]:
    """Rows of sim's patch table (lab.measure.sim.backend.allocator_api) for `allocator`, the
    run's lab.measure.sim.allocator_replay.Replay."""
    m = allocator.model

    def stats(device=None) -> dict[str, int]:
        return memory_stats(m)

    def snapshot(*args, **kwargs) -> list[dict]:
        return memory_snapshot(m)

    def mem_get_info(device=None) -> tuple[int, int]:
        return m.total - m.stats.reserved, m.total

    def set_fraction(fraction: float, device=None) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"invalid fraction: {fraction}. Please set within [0, 1].")
        m.cap = int(fraction * m.total)  # allowed_memory_maximum = fraction x total

    rows = []
    for owner in (torch.cuda, torch.cuda.memory):
        rows += [Patch(owner, "memory_stats", lambda _: stats,
                       "torch.cuda.memory_stats() (and memory_allocated ...) read the model"),
                 Patch(owner, "memory_snapshot", lambda _: snapshot,
                       "torch.cuda.memory_snapshot(): the model's segments"),
                 Patch(owner, "mem_get_info", lambda _: mem_get_info,
                       "torch.cuda.mem_get_info(): the model's GPU, less what it reserved"),
                 Patch(owner, "set_per_process_memory_fraction", lambda _: set_fraction,
                       "a memory fraction set at run time caps the model")]
    return rows


__all__ = ["memory_api_patches"]
