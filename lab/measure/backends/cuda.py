"""`CudaBackend`: the real caching allocator of a CUDA GPU, beside the tensor tracker.

Order matters: the tracked pass runs first, on a cold allocator, so its counters are what a
fresh training script would see; the timed pass then runs warm (cuBLAS handles, kernels loaded)
without the tracker's overhead. Under the runner service (`turns`) the tracked pass runs beside
other runs on the GPU and the timed pass alone (lab.runner.gpu_turns says why).
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Protocol

import torch

from .. import cuda_allocator as cuda_mod
from ..allocator_view import UNTRACKED_PEAK_NOTE
from ..device import gpu_info, set_virtual_gpu
from ..result import AllocatorStats, DeviceInfo, RunResult
from ..snapshot import device_trace_timelines
from ..trace import PhaseRecord, Trace
from ..tracker import TensorTracker
from .base import Backend, Emit

# What PyTorch raises from backward when the allocator's history recorder (stacks="python")
# meets some training loops on CUDA. Seen: Lightning's Trainer, torch 2.11 + lightning 2.6 on an
# H200; the same run without the recorder works, with or without the tensor tracker.
HISTORY_INCOMPATIBLE = "returned NULL without setting an exception"


class GpuTurnsLike(Protocol):
    """lab.runner.gpu_turns.GpuTurns, as this backend uses it (the core never imports the runner)."""

    def measuring(self) -> ContextManager[Any]: ...  # a hold with let_timers_in()

    def timing(self, on_wait: Callable[[], None] | None = None) -> ContextManager[None]: ...


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self, gpu_memory: int | None = None, *, record_history: bool = True,
                 turns: GpuTurnsLike | None = None):
        """`record_history=False`: no `_record_memory_history`, so no allocator timeline and no
        profile.pkl (the second attempt for code whose backward breaks under it)."""
        super().__init__(gpu_memory)
        self.gpu = gpu_info()
        if self.gpu is None:
            raise RuntimeError("mode 'cuda' needs a CUDA GPU and none is visible to PyTorch")
        self.device = torch.device("cuda", 0)
        self.record_history = record_history
        self.turns = turns
        self.recorder: cuda_mod.MemoryRecorder | None = None
        self.phase_us: list[tuple[str, int]] = []  # (phase, start in µs): the history's x axis
        self._hold = None  # the GPU turn of the tracked pass
        self._blocks_before: dict[int, int] | None = None

    def device_info(self) -> DeviceInfo:
        return DeviceInfo(self.gpu.name, "cuda", self.gpu.total_bytes, self.gpu_memory)

    def prepare(self, params: dict[str, Any]) -> None:
        if self.gpu_memory:
            set_virtual_gpu(self.gpu_memory)
        # A lesson that teaches `_record_memory_history` records it itself (scale parameter
        # `memory_history = "experiment"`): a second recorder would clash with it (one ring per
        # process; its `enabled=None` clears the lab's entries), so the lab's stays off and the
        # experiment hands its snapshot over with `run.keep_snapshot(...)`.
        own_history = params.get("memory_history") == "experiment"
        if self.record_history and not own_history:
            self.recorder = cuda_mod.MemoryRecorder()

    def new_tracker(self) -> TensorTracker:
        return TensorTracker(device_type="cuda")  # CPU tensors are not the GPU's memory

    @contextmanager
    def measuring(self) -> Iterator[None]:
        with ExitStack() as stack:
            if self.turns is not None:  # this run's turn beside others, until its counters are read
                self._hold = stack.enter_context(self.turns.measuring())
            if self.recorder:
                torch.cuda.reset_peak_memory_stats()
                self.recorder.start()
            try:
                yield
            finally:
                torch.cuda.synchronize(self.device)  # nothing of this pass still runs on the GPU
                self._hold = None

    def phase_begin(self, rec: PhaseRecord, checked: bool) -> None:
        # a memory_snapshot() walks every segment: too slow for every boundary, so only the
        # phases a lesson checks have their blocks diffed
        self._blocks_before = cuda_mod.active_blocks(self.device.index or 0) if checked else None
        torch.cuda.reset_peak_memory_stats()
        rec.cuda["start_allocated"] = cuda_mod.memory_stats(self.device).allocated
        if self._hold is not None:  # a run waiting to time its steps may go between two phases
            torch.cuda.synchronize(self.device)
            self._hold.let_timers_in()
        self.phase_us.append((rec.name, time.time_ns() // 1000))

    def phase_end(self, rec: PhaseRecord) -> None:
        s = cuda_mod.memory_stats(self.device)
        rec.cuda.update(end_allocated=s.allocated, peak_allocated=s.peak_allocated,
                        reserved=s.reserved, peak_reserved=s.peak_reserved)
        if self._blocks_before is not None:
            before = self._blocks_before
            rec.new_blocks = {a: n for a, n in cuda_mod.active_blocks(self.device.index or 0).items()
                              if before.get(a) != n}
            self._blocks_before = None

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def snapshot(self, trace: Trace, to_file: bool, at_oom: bool = False) -> dict | None:
        """The allocator's history; for a run that ended in an out-of-memory, the snapshot its
        observer took at the failing allocation (the state that failed)."""
        if self.recorder is None:
            return None
        snap = self.recorder.snapshot(at_oom=at_oom)
        self.recorder.stop()
        return snap

    def finish(self, result: RunResult, phases: list[PhaseRecord], snapshot: dict | None) -> None:
        stats = cuda_mod.memory_stats(self.device)
        # peaks are reset at every phase start, so the run's peak is the max over phases
        stats.peak_allocated = max([p.allocated_peak_bytes or 0 for p in result.phases]
                                   + [stats.peak_allocated])
        stats.peak_reserved = max([r.cuda.get("peak_reserved", 0) for r in phases]
                                  + [stats.peak_reserved])
        a = result.allocator = AllocatorStats.from_counters(stats)
        a.nvml_used_bytes = cuda_mod.nvml_used_bytes(self.device.index or 0)
        a.untracked_peak_bytes = a.peak_allocated_bytes - result.peak.bytes
        if snapshot is not None:
            a.timeline, a.reserved_timeline = device_trace_timelines(
                snapshot, self.phase_us, self.device.index or 0)
        if a.untracked_peak_bytes > 0:
            result.notes.append(
                f"{UNTRACKED_PEAK_NOTE} {a.untracked_peak_bytes:,} B above the "
                "tracked tensors' peak: block rounding (512 B), the cuBLAS workspace and any "
                "allocation made outside a tensor.")

    # ---- timing -------------------------------------------------------------------------------
    def timing_turn(self, emit: Emit) -> ContextManager[None]:
        if self.turns is None:
            return nullcontext()

        def on_wait() -> None:
            emit({"type": "status", "stage": "waiting", "turn": True,
                  "text": "waiting to time the steps alone (another run is timing)"})

        return self.turns.timing(on_wait)

    def before_timing(self) -> None:
        torch.cuda.empty_cache()

    def second_attempt(self, result: RunResult) -> tuple[Backend, str] | None:
        if not (self.recorder and result.status == "error"
                and HISTORY_INCOMPATIBLE in (result.error or "")):
            return None
        # this code's backward breaks under the allocator's history recorder: measure it again
        # without the recorder (tracker, memory_stats and NVML still on)
        cuda_mod.release_for_a_second_attempt()
        note = ("Measured without torch.cuda.memory._record_memory_history (no allocator "
                f"timeline, no profile.pkl): with it, backward failed: {result.error}")
        return CudaBackend(self.gpu_memory, record_history=False, turns=self.turns), note

    # ---- the caching allocator's API ------------------------------------------------------------
    def empty_cache(self) -> bool:
        torch.cuda.empty_cache()
        return True

    def set_allocator_settings(self, settings: str) -> bool:
        return cuda_mod.set_allocator_settings(settings)

    def memory_counters(self) -> dict[str, int] | None:
        out = {"allocated": torch.cuda.memory_allocated(self.device),
               "reserved": torch.cuda.memory_reserved(self.device)}
        used = cuda_mod.nvml_used_bytes(self.device.index or 0)
        if used is not None:
            out["nvml_used"] = used
        return out


__all__ = ["CudaBackend", "GpuTurnsLike", "HISTORY_INCOMPATIBLE"]
