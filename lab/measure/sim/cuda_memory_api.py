"""`torch.cuda.memory_allocated()` and friends, answered by the allocator model (sim).

A script's own logging (`print(torch.cuda.max_memory_allocated() / 1e9)`) then prints what sim
predicts the GPU's caching allocator would say at that moment. The model (lab.measure.sim.allocator,
fed online by the tensor tracker through a `Replay`) keeps the run's peaks for the result; a
script's `reset_peak_memory_stats()` must not move those, so the peaks the script sees are kept
here, from the model's series of (event, bytes) changes: the largest value since the last reset.

    api = MemoryApi(replay, total_bytes=gpu.total_bytes)
    api.max_memory_allocated()   # peak since the script's last reset (or the start)
    api.memory_stats()           # the keys PyTorch names, those the model knows

Keys of `memory_stats()` the model has no counterpart for (requested bytes, inactive split
blocks, cumulative allocation counts) are left out rather than guessed: a script that reads
one gets a KeyError, as on a PyTorch build without that counter.
"""

from __future__ import annotations

from .allocator_replay import Replay
from .gpus import CONTEXT_BYTES


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
        s = self.stats
        peak_alloc, peak_res = self.max_memory_allocated(), self.max_memory_reserved()
        # "all" only: the model keeps the large and small pools' blocks apart, not their counters
        out: dict[str, int] = {}
        for key, cur, peak in (("allocated_bytes", s.allocated, peak_alloc),
                               ("active_bytes", s.allocated, peak_alloc),
                               ("reserved_bytes", s.reserved, peak_res)):
            out[f"{key}.all.current"] = cur
            out[f"{key}.all.peak"] = peak
        out["segment.all.current"] = s.segments
        out["allocation.all.current"] = len(self.replay.live)
        out["num_alloc_retries"] = s.num_alloc_retries
        out["num_ooms"] = s.num_ooms
        return dict(sorted(out.items()))

    def memory_summary(self, device=None, abbreviated: bool = False) -> str:
        gb = 1e9
        return ("memlab sim: the caching allocator as predicted by its model\n"
                f"  allocated {self.memory_allocated() / gb:.3f} GB "
                f"(peak {self.max_memory_allocated() / gb:.3f} GB)\n"
                f"  reserved  {self.memory_reserved() / gb:.3f} GB "
                f"(peak {self.max_memory_reserved() / gb:.3f} GB)\n"
                f"  segments {self.stats.segments}, alloc retries {self.stats.num_alloc_retries}, "
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


__all__ = ["MemoryApi"]
