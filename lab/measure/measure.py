"""Measure one variant in this process: the tracked pass, then (cpu/cuda) an untracked timed pass.

Called by `lab.runner.worker` in a fresh process per variant, so the CUDA allocator starts
clean. Order matters on CUDA: the tracked pass runs first, on a cold allocator, so its counters
are what a fresh training script would see; the timing pass then runs warm (cuBLAS handles,
kernels loaded) without the tracker's overhead.
"""

from __future__ import annotations

import gc
import threading
import time
from contextlib import ExitStack, nullcontext
from datetime import datetime, timezone
from typing import Any, Callable, ContextManager, Protocol

import torch

from . import cuda as cuda_mod
from .device import gpu_info, set_virtual_gpu
from .report import (build_blocks, build_checks, build_peak, build_phases, build_timeline,
                     series_timelines)
from .result import AllocatorStats, DeviceInfo, RunResult
from .session import Session
from .sim.policy import (SIM_NOTES, SimPolicy, fake_mode, new_allocator, transformers_version,
                       version_notes)
from .snapshot import device_trace_timelines, save_snapshot, trace_to_snapshot
from .tracker import TensorTracker


class GpuTurnsLike(Protocol):
    """lab.runner.gpu_turns.GpuTurns, as this module uses it (the core never imports the runner)."""

    def measuring(self) -> ContextManager[Any]: ...  # a hold with let_timers_in()

    def timing(self, on_wait: Callable[[], None] | None = None) -> ContextManager[None]: ...

Emit = Callable[[dict[str, Any]], None]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


class _Sampler(threading.Thread):
    """Streams live bytes every `interval` s so the UI can show progress while a variant runs."""

    def __init__(self, tracker: TensorTracker, emit: Emit, interval: float = 0.1):
        super().__init__(daemon=True)
        self.tracker, self.emit, self.interval = tracker, emit, interval
        self.stopped = threading.Event()

    def run(self):
        while not self.stopped.wait(self.interval):
            tr = self.tracker
            self.emit({"type": "sample", "t": round(tr.now(), 4), "live_bytes": tr.live_bytes,
                       "phase": tr.phase, "events": len(tr.trace.events)})


def measure_variant(
    fn: Callable[[Session], Any],
    *,
    lesson: str,
    variant: str,
    mode: str,
    scale: str,
    params: dict[str, Any],
    checks: list[dict] | None = None,
    gpu_memory: int | None = None,
    profile_path: str | None = None,
    timing: bool = True,
    emit: Emit | None = None,
    record_history: bool = True,
    turns: GpuTurnsLike | None = None,
) -> RunResult:
    """`record_history=False` (cuda): no `_record_memory_history`, so no allocator timeline and
    no profile.pkl — the fallback for code whose backward breaks under it (HISTORY_INCOMPATIBLE).
    `turns` (cuda, given by the runner service): the tracked pass runs beside other runs on the
    GPU, the timed pass alone (lab.runner.gpu_turns says why)."""
    emit = emit or (lambda msg: None)
    started = time.perf_counter()
    if gpu_memory is None and params.get("gpu_memory"):
        # a lesson can run on a virtual GPU of its own (lesson 18); --gpu-memory still overrides
        gpu_memory = int(params["gpu_memory"])
    if mode == "cuda":
        info = gpu_info()
        if info is None:
            raise RuntimeError("mode 'cuda' needs a CUDA GPU and none is visible to PyTorch")
        device = torch.device("cuda", 0)
        dev = DeviceInfo(info.name, "cuda", info.total_bytes, gpu_memory)
        if gpu_memory:
            set_virtual_gpu(gpu_memory)
    elif mode == "sim":
        device = torch.device("cpu")
        dev = DeviceInfo("simulated (FakeTensorMode)", "sim", gpu_memory, gpu_memory)
    else:
        device = torch.device("cpu")
        dev = DeviceInfo("CPU", "cpu", gpu_memory, gpu_memory)

    result = RunResult(lesson=lesson, variant=variant, mode=mode, scale=scale, device=dev,
                       params=dict(params), simulated=mode == "sim",
                       torch_version=torch.__version__, transformers_version=transformers_version(),
                       created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    _warm_up_dispatch_mode()
    torch.manual_seed(0)
    # sim: CUDA's paths (policy) and the caching-allocator model, which also enforces the cap
    allocator = new_allocator(gpu_memory) if mode == "sim" else None
    policy = SimPolicy(allocator) if mode == "sim" else None
    tracker = TensorTracker(capacity=gpu_memory if mode == "cpu" else None,
                            device_type="cuda" if mode == "cuda" else None,
                            policy=policy, allocator=allocator)
    if allocator is not None:
        allocator.clock = lambda: len(tracker.trace.events)
    # A lesson that teaches `_record_memory_history` records it itself (scale parameter
    # `memory_history = "experiment"`): a second recorder would clash with it (one ring per
    # process; its `enabled=None` clears the lab's entries), so the lab's stays off and the
    # experiment hands its snapshot over with `run.keep_snapshot(...)`.
    own_history = params.get("memory_history") == "experiment"
    recorder = (cuda_mod.MemoryRecorder() if mode == "cuda" and record_history and not own_history
                else None)
    phase_us: list[tuple[str, int]] = []

    hold = None  # the GPU turn of the tracked pass (cuda, under the runner service)

    def on_phase(name: str) -> None:
        if hold is not None:  # a run waiting to time its steps may go between two phases
            torch.cuda.synchronize(device)
            hold.let_timers_in()
        phase_us.append((name, time.time_ns() // 1000))
        emit({"type": "phase", "name": name, "live_bytes": tracker.live_bytes})

    session = Session(mode, params, device, tracker,
                      cuda_stats=(lambda: cuda_mod.stats_dict(device)) if mode == "cuda" else None,
                      on_phase=on_phase,
                      block_phases={c["phase"] for c in checks or [] if c.get("measure", "delta") == "delta"})
    sampler = _Sampler(tracker, emit)
    measuring = ExitStack()  # this run's turn beside others, until its counters are read
    if turns is not None and mode == "cuda":
        hold = measuring.enter_context(turns.measuring())
    if recorder:
        torch.cuda.reset_peak_memory_stats()
        recorder.start()
    sampler.start()
    try:
        with fake_mode() if mode == "sim" else nullcontext(), policy or nullcontext(), tracker:
            fn(session)
    except Exception as exc:  # an experiment's failure is a result, never a crash
        result.status = "oom" if is_oom(exc) else "error"
        result.error = _first_line(exc) if result.status == "error" else str(exc).strip()
        tracker.close()  # the timeline stops at the failure, before the traceback is released
        exc = None
    finally:
        sampler.stopped.set()
    trace = tracker.close()
    if mode != "sim":  # fake tensors hold no memory; a full collection costs ~0.5 s here
        gc.collect()
    kept, session.kept_snapshot = session.kept_snapshot, None
    if profile_path and mode != "cuda" and kept is None:
        # cpu/sim: the tracker's trace, written in the snapshot format memory_viz reads
        save_snapshot(trace_to_snapshot(trace), profile_path)
        result.profile_path = profile_path

    snap = None
    if recorder:
        snap = recorder.snapshot()
        recorder.stop()
    elif kept is not None:  # the experiment's own recording (memory_history = "experiment")
        snap = kept
    if snap is not None and profile_path:
        save_snapshot(snap, profile_path)
        result.profile_path = profile_path

    result.phases = build_phases(session.phases, trace)
    result.timeline = build_timeline(trace)
    result.peak = build_peak(trace)
    result.blocks = build_blocks(trace)
    result.metrics = dict(session.metrics)
    result.notes = list(session.notes)
    if checks:
        # `cuda_kernels` (1 on a GPU and in sim, which takes CUDA's paths; 0 on the CPU) lets a
        # formula count what only CUDA's kernels save (lesson 05: cuDNN attention's RNG state)
        names = {**params, "cuda_kernels": int(mode in ("cuda", "sim"))}
        result.checks = build_checks(checks, variant, names, trace, result.phases, mode == "cuda")
    if mode == "sim":
        result.notes.extend(SIM_NOTES)
        result.notes.extend(version_notes())
        result.allocator = _predicted(allocator, result.peak.bytes)
    if mode == "cuda":
        stats = cuda_mod.memory_stats(device)
        result.allocator = AllocatorStats(
            # peaks are reset at every phase start, so the run's peak is the max over phases
            peak_allocated_bytes=max([p.allocated_peak_bytes or 0 for p in result.phases]
                                     + [stats.peak_allocated]),
            peak_reserved_bytes=max([r.cuda.get("peak_reserved", 0) for r in session.phases]
                                    + [stats.peak_reserved]),
            end_allocated_bytes=stats.allocated,
            end_reserved_bytes=stats.reserved,
            nvml_used_bytes=cuda_mod.nvml_used_bytes(device.index or 0),
            num_alloc_retries=stats.num_alloc_retries,
            num_ooms=stats.num_ooms,
        )
        result.allocator.untracked_peak_bytes = result.allocator.peak_allocated_bytes - result.peak.bytes
        if snap is not None:
            result.allocator.timeline, result.allocator.reserved_timeline = device_trace_timelines(
                snap, phase_us, device.index or 0)
        if result.allocator.untracked_peak_bytes > 0:
            result.notes.append(
                f"The CUDA allocator's peak is {result.allocator.untracked_peak_bytes:,} B above the "
                "tracked tensors' peak: block rounding (512 B), the cuBLAS workspace and any "
                "allocation made outside a tensor."
            )
    del trace, session, tracker
    if mode != "sim":
        gc.collect()
    if mode == "cuda":
        torch.cuda.synchronize(device)  # nothing of this pass still runs on the GPU
    measuring.close()
    hold = None

    if timing and mode != "sim" and result.status == "ok":
        def on_wait() -> None:
            emit({"type": "status", "stage": "waiting", "turn": True,
                  "text": "waiting to time the steps alone (another run is timing)"})

        with turns.timing(on_wait) if turns is not None and mode == "cuda" else nullcontext():
            # no samples stream from the untracked pass: say what the silence is
            emit({"type": "status", "stage": "timing", "text": "timing pass (untracked)"})
            result.step_time_s, timed_metrics = _timed_pass(fn, mode, params, device)
            if mode == "cuda":
                torch.cuda.synchronize(device)
        # metrics the untracked pass measured (throughput, GPU busy %) replace the tracked
        # pass's, which the tracker's overhead slowed down; deterministic ones are equal anyway
        result.metrics.update(timed_metrics)
    result.wall_s = time.perf_counter() - started
    return result


def _predicted(allocator, tracked_peak: int) -> AllocatorStats:
    """The allocator model's numbers for a sim run, flagged as predicted."""
    r = allocator.finish()
    stats = AllocatorStats(peak_allocated_bytes=r.peak_allocated, peak_reserved_bytes=r.peak_reserved,
                           end_allocated_bytes=r.end_allocated, end_reserved_bytes=r.end_reserved,
                           num_alloc_retries=r.num_alloc_retries, num_ooms=r.num_ooms,
                           untracked_peak_bytes=r.peak_allocated - tracked_peak, predicted=True)
    stats.timeline, stats.reserved_timeline = series_timelines(r.allocated_series, r.reserved_series)
    return stats


# What PyTorch raises from backward when the allocator's history recorder (stacks="python")
# meets some training loops on CUDA. Seen: Lightning's Trainer, torch 2.11 + lightning 2.6 on an
# H200; the same run without the recorder works, with or without the tensor tracker.
HISTORY_INCOMPATIBLE = "returned NULL without setting an exception"


def _warm_up_dispatch_mode() -> None:
    """The first op under any TorchDispatchMode imports torch._dynamo (~2 s on a laptop):
    pay that before the clock starts, or the first phase looks 2 s long."""
    with TensorTracker() as warm:
        torch.empty(0)
    warm.close()


def _timed_pass(fn, mode: str, params: dict[str, Any],
                device: torch.device) -> tuple[float | None, dict[str, float]]:
    """Run the variant again without the tracker: (time of its non-setup phases per step, metrics)."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
    torch.manual_seed(0)
    session = Session(mode, params, device)
    try:
        fn(session)
    except Exception:
        return None, {}
    timed = sum(r.duration_s for r in session.phases if not r.setup)
    steps = max(1, int(params.get("steps", 1)))
    return timed / steps, dict(session.metrics)
