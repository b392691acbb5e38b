"""torch.cuda's allocator API in sim: the calls an experiment makes reach the allocator model.

An experiment about the allocator is plain PyTorch (`torch.cuda.memory_stats()`,
`torch.cuda.memory_snapshot()`, `torch.cuda.mem_get_info()`,
`torch.cuda.set_per_process_memory_fraction()`); on the CPU build sim runs on, those would
answer nothing or fail. Inside a sim run they answer from the model
(lab.measure.sim.allocator.view): the same keys, the same segments, the model's numbers.
`mem_get_info` answers (total - reserved, total) for the model's GPU: a real GPU's free memory
is also short of the CUDA context (about 1.2 GB on the H200, lesson 17), which sim does not
have; and, as on a GPU, it ignores `set_per_process_memory_fraction`. Patching
torch.cuda.memory.memory_stats also answers memory_allocated / memory_reserved /
max_memory_*, which read it through their module's globals. Peaks are the run's:
reset_peak_memory_stats is not routed. (empty_cache and the settings: lab.measure.backends.sim.)

A user's script under the CUDA facade (lab.measure.sim.facade.cuda_facade) asks more of it: its own
logging prints `max_memory_allocated()` after a `reset_peak_memory_stats()`. `MemoryApi` answers
the whole memory API for it; the peaks it reports are the script's (since its last reset), kept
from the model's series of (event, bytes) changes, while the model's own peaks stay the run's
for the result. Its `mem_get_info` also leaves out the CUDA context (the card's row says how
much), since a whole card's allocator limit does (lab.measure.sim.gpus).
"""

from __future__ import annotations

import torch

from ..allocator.replay import Replay
from ..allocator.view import memory_snapshot, memory_stats
from ..gpus import CONTEXT_BYTES
from ..patches import Patch


def memory_api_patches(allocator) -> list[Patch]:
    """Rows of sim's patch table (lab.measure.backends.sim.allocator_api) for `allocator`, the
    run's lab.measure.sim.allocator.replay.Replay."""
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


class _RunningMax:
    """The largest value of a growing series since a reset, read incrementally."""

    def __init__(self, series: list[tuple[int, int]], current):
        self.series, self.current = series, current
        self.start = len(series)
        self.best = current()
        self.seen = self.start

    def reset(self) -> None:
        self.start = self.seen = len(self.series)
        self.best = self.current()

    def value(self) -> int:
        for _, v in self.series[self.seen:]:
            if v > self.best:
                self.best = v
        self.seen = len(self.series)
        return max(self.best, self.current())


class MemoryApi:
    """What `torch.cuda`'s memory functions answer in sim (see the module docstring)."""

    def __init__(self, replay: Replay, total_bytes: int):
        self.replay = replay
        self.total_bytes = total_bytes
        stats = replay.model.stats
        # without a series (a Replay made without one) the model's own peaks stand in: they
        # cannot be reset, and the result says the peaks are the run's
        self._alloc = _RunningMax(replay.result.allocated_series, lambda: stats.allocated) \
            if replay.series else None
        self._reserved = _RunningMax(replay.result.reserved_series, lambda: stats.reserved) \
            if replay.series else None

    @property
    def stats(self):
        return self.replay.model.stats

    # ---- counters ------------------------------------------------------------------------------
    def memory_allocated(self, device=None) -> int:
        return self.stats.allocated

    def memory_reserved(self, device=None) -> int:
        return self.stats.reserved

    def max_memory_allocated(self, device=None) -> int:
        return self._alloc.value() if self._alloc else self.stats.peak_allocated

    def max_memory_reserved(self, device=None) -> int:
        return self._reserved.value() if self._reserved else self.stats.peak_reserved

    def reset_peak_memory_stats(self, device=None) -> None:
        for m in (self._alloc, self._reserved):
            if m is not None:
                m.reset()

    def mem_get_info(self, device=None) -> tuple[int, int]:
        """(free, total) as the driver reports them: the card minus the CUDA context and what
        the allocator reserved (a --gpu-memory cap does not change what the driver says)."""
        free = self.total_bytes - CONTEXT_BYTES - self.stats.reserved
        return max(0, free), self.total_bytes

    def memory_stats(self, device=None) -> dict[str, int]:
        """The model's counters (lab.measure.sim.allocator.view), with the script's peaks."""
        out = memory_stats(self.replay.model)
        peak_alloc, peak_res = self.max_memory_allocated(), self.max_memory_reserved()
        out.update({"allocated_bytes.all.peak": peak_alloc, "active_bytes.all.peak": peak_alloc,
                    "reserved_bytes.all.peak": peak_res})
        return out

    def memory_summary(self, device=None, abbreviated: bool = False) -> str:
        gb = 1e9
        return ("memlab sim: the caching allocator as predicted by its model\n"
                f"  allocated {self.memory_allocated() / gb:.3f} GB "
                f"(peak {self.max_memory_allocated() / gb:.3f} GB)\n"
                f"  reserved  {self.memory_reserved() / gb:.3f} GB "
                f"(peak {self.max_memory_reserved() / gb:.3f} GB)\n"
                f"  segments {self.memory_stats()['segment.all.current']}, alloc retries "
                f"{self.stats.num_alloc_retries}, "
                f"OOMs {self.stats.num_ooms}\n")

    # ---- the allocator's knobs -------------------------------------------------------------
    def empty_cache(self) -> None:
        self.replay.empty_cache()

    def set_per_process_memory_fraction(self, fraction: float, device=None) -> None:
        """The cap the real allocator enforces: fraction x the card's memory."""
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self.replay.model.cap = int(fraction * self.total_bytes)

    def get_per_process_memory_fraction(self, device=None) -> float:
        cap = self.replay.model.cap
        return 1.0 if cap is None else cap / self.total_bytes


__all__ = ["MemoryApi", "memory_api_patches"]
