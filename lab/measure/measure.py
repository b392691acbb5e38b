"""Measure one variant in this process, over a backend: the tracked pass, then (where the mode
times steps) an untracked timed pass.

    result = measure(fn, spec, backend_for(mode, gpu_memory=...), emit)

Called by `lab.runner.worker` in a fresh process per variant (the spec from its request,
RunRequest.spec), so the CUDA allocator starts clean. What differs between cuda, cpu and sim
is the backend's (lab.measure.backends): this module runs the same steps for every mode.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

import torch

from .allocator_view import from_allocator
from .backends import Backend
from .backends.base import Emit
from .backends.cuda import HISTORY_INCOMPATIBLE  # noqa: F401  (re-exported for older callers)
from .result_parts import build_blocks, build_checks, build_peak, build_phases, build_timeline
from .result import CodePaths, DeviceInfo, RunResult, Timing
from .session import Session
from .spec import VariantSpec
from .snapshot import save_snapshot
from .timing import TIMED_STEPS, StepClock, timed_params
from .tracker import TensorTracker
from .versions import libraries_used, library_versions, transformers_version


def error_line(exc: BaseException) -> str:
    """A failed experiment's error, in one line ("ValueError: ...")."""
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


def measure(fn: Callable[[Session], Any], spec: VariantSpec, backend: Backend,
            emit: Emit | None = None) -> RunResult:
    """Measure `fn` once over `backend`; again over the backend's second attempt when the first
    one failed because of how it was measured (a CUDA history recorder that breaks backward)."""
    result = _measure_once(fn, spec, backend, emit or (lambda msg: None))
    again = backend.second_attempt(result)
    if again is not None:
        retry, note = again
        result = _measure_once(fn, spec, retry, emit or (lambda msg: None))
        result.notes.append(note)
    return result


def _measure_once(fn, spec: VariantSpec, backend: Backend, emit: Emit) -> RunResult:
    started = time.perf_counter()
    result = _new_result(spec, backend.name, backend.device_info())
    warm_up_dispatch_mode()
    torch.manual_seed(0)
    backend.prepare(spec.params)
    tracker = backend.new_tracker()

    def on_phase(name: str) -> None:
        emit({"type": "phase", "name": name, "live_bytes": tracker.live_bytes})

    session = Session(backend, spec.params, tracker, on_phase=on_phase,
                      checked_phases=spec.checked_phases)
    sampler = _Sampler(tracker, emit)
    with backend.measuring(), libraries_used() as used:
        sampler.start()
        try:
            with backend.running(), tracker:
                fn(session)
        except Exception as exc:  # an experiment's failure is a result, never a crash
            result.status = "oom" if is_oom(exc) else "error"
            result.error = error_line(exc) if result.status == "error" else str(exc).strip()
            tracker.close()  # the timeline stops at the failure, before the traceback is released
            exc = None
        finally:
            sampler.stopped.set()
        trace = tracker.close()
        result.versions = library_versions(used)  # before finish: sim's notes name what it used
        backend.collect_garbage()
        kept, session.kept_snapshot = session.kept_snapshot, None
        # the experiment's own recording (memory_history = "experiment") or the backend's
        snap = kept if kept is not None else backend.snapshot(trace, bool(spec.profile_path),
                                                              at_oom=result.status == "oom")
        if snap is not None and spec.profile_path:
            save_snapshot(snap, spec.profile_path)
            result.profile_path = spec.profile_path
        _fill(result, spec, backend, trace, session)
        backend.finish(result, session.phases, snap)
        if session.used_untracked:  # its steps ran outside the tracker: the allocator's numbers
            from_allocator(result, session.phases)
        del trace, session, tracker, snap, kept
        backend.collect_garbage()

    if spec.timing and backend.info.timed and result.status == "ok":
        timing, timed_metrics = _timed_pass(backend, fn, spec.params, emit)
        result.timing = timing
        result.step_time_s = timing.median_s if timing is not None else None
        # metrics the untracked pass measured (throughput, GPU busy %) replace the tracked
        # pass's, which the tracker's overhead slowed down; deterministic ones are equal anyway
        result.metrics.update(timed_metrics)
    result.wall_s = time.perf_counter() - started
    return result


def _new_result(spec: VariantSpec, mode: str, device: DeviceInfo) -> RunResult:
    return RunResult(lesson=spec.lesson, variant=spec.variant, mode=mode, scale=spec.scale,
                     device=device, params=dict(spec.params), torch_version=torch.__version__,
                     transformers_version=transformers_version(),
                     created=datetime.now(timezone.utc).isoformat(timespec="seconds"))


def _fill(result: RunResult, spec: VariantSpec, backend: Backend, trace, session: Session) -> None:
    """The parts of a result every mode has: phases, timeline, peak, blocks, checks, notes."""
    result.phases = build_phases(session.phases, trace)
    result.timeline = build_timeline(trace)
    result.peak = build_peak(trace)
    result.blocks = build_blocks(trace)
    result.metrics = dict(session.metrics)
    result.notes = list(session.notes)
    attention, optimizer = session.tracker.code_paths()
    result.code_paths = CodePaths(attention=attention, optimizer=optimizer)
    if spec.checks:
        # `cuda_kernels` (1 on a GPU and in sim, which takes CUDA's paths; 0 on the CPU) lets a
        # formula count what only CUDA's kernels save (lesson 05: cuDNN attention's RNG state)
        names = {**spec.params, "cuda_kernels": int(backend.info.cuda_kernels)}
        result.checks = build_checks(spec.checks, spec.variant, names, trace, result.phases,
                                     backend.info.allocator == "measured")


def _timed_pass(backend: Backend, fn: Callable[[Session], Any], params: dict[str, Any],
                emit: Emit) -> tuple[Timing | None, dict[str, float]]:
    """Run the variant again without the tracker: (its step times, the metrics it measured).

    The metrics come from a pass of the experiment's own steps (they may depend on how many:
    losses logged, the last loss); when that pass timed fewer than TIMED_STEPS steps and the
    experiment takes a `steps` parameter, a second pass of more steps gives the times."""
    with backend.timing_turn(emit):
        # no samples stream from the untracked pass: say what the silence is
        emit({"type": "status", "stage": "timing", "text": "timing pass (untracked)"})
        timing, metrics = _untracked_pass(backend, fn, params)
        more = timed_params(params)
        if (timing is not None and len(timing.steps_s) < TIMED_STEPS
                and more.get("steps") != params.get("steps")):
            timing = _untracked_pass(backend, fn, more)[0] or timing
    return timing, metrics


def _untracked_pass(backend: Backend, fn, params: dict[str, Any]
                    ) -> tuple[Timing | None, dict[str, float]]:
    backend.before_timing()
    torch.manual_seed(0)
    clock = StepClock(backend.sync)
    session = Session(backend, params, clock=clock)
    try:
        fn(session)
        clock.stop()
    except Exception:
        return None, {}
    return clock.timing(), dict(session.metrics)


def warm_up_dispatch_mode() -> None:
    """The first op under any TorchDispatchMode imports torch._dynamo (~2 s on a laptop):
    pay that before the clock starts, or the first phase looks 2 s long."""
    with TensorTracker() as warm:
        torch.empty(0)
    warm.close()


__all__ = ["VariantSpec", "error_line", "is_oom", "measure", "warm_up_dispatch_mode"]
