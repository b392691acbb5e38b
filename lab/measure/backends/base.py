"""`Backend`: one way of measuring (a mode), behind the interface `measure` runs a variant over.

A backend answers everything that differs between cuda, cpu and sim, so that nothing outside
`lab/measure/backends/`, `lab/measure/sim/backend.py` and the mode rule (lab.measure.modes)
decides by a mode's name:

- the device experiments make tensors on, and what the result says it was (`device_info`);
- the tensor tracker and who it tells of every allocation (`new_tracker`: sim's allocator model,
  the cpu backend's virtual-GPU guard);
- the context a run executes in (`running`: sim's fake tensors and CUDA's paths) and the one a
  tracked pass is measured in (`measuring`: a GPU turn, the allocator's history);
- what a phase boundary reads (`phase_begin` / `phase_end`: the CUDA allocator's counters);
- the allocator's numbers (`finish`: measured on CUDA, predicted in sim, none on the CPU);
- the timed pass (`timed_pass`), and a second attempt when the first one's failure was the
  lab's own doing (`second_attempt`);
- the caching allocator's API as experiments reach it (`run.empty_cache()` etc.).

The defaults here are "nothing": a backend overrides what it has.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

import torch

from ..modes import ModeInfo, mode_info
from ..result import DeviceInfo, RunResult, Timing
from ..snapshot import trace_to_snapshot
from ..timing import TIMED_STEPS, StepClock, timed_params
from ..tracker import TensorTracker
from ..trace import Trace

if TYPE_CHECKING:
    from ..session import PhaseRecord, Session

Emit = Callable[[dict[str, Any]], None]


class Backend:
    name = ""  # the mode: a key of lab.measure.modes.MODE_INFO

    def __init__(self, gpu_memory: int | None = None):
        self.info: ModeInfo = mode_info(self.name)
        self.gpu_memory = gpu_memory  # a virtual GPU's capacity (--gpu-memory), or None
        self.device = torch.device("cpu")  # where experiments make their tensors

    # ---- the run ------------------------------------------------------------------------------
    def device_info(self) -> DeviceInfo:
        raise NotImplementedError

    def prepare(self, params: dict[str, Any]) -> None:
        """Before the tracked pass (cuda: the virtual GPU's cap, the history recorder)."""

    def new_tracker(self) -> TensorTracker:
        return TensorTracker()

    @contextmanager
    def measuring(self) -> Iterator[None]:
        """Around the tracked pass and the reading of its counters."""
        yield

    def running(self) -> ContextManager[Any]:
        """The context the experiment's code runs in."""
        return nullcontext()

    def phase_begin(self, rec: PhaseRecord, checked: bool) -> None:
        """A tracked phase starts (`checked`: a lesson check reads its allocator blocks)."""

    def phase_end(self, rec: PhaseRecord) -> None:
        """A tracked phase ended."""

    def sync(self) -> None:
        """Wait for the device (a phase's time is the device's, not the launch's)."""

    def collect_garbage(self) -> None:
        gc.collect()

    def snapshot(self, trace: Trace, to_file: bool) -> dict | None:
        """The run as a memory_viz snapshot: the allocator's own history where it was recorded,
        else (only when a file is asked for) the tracker's trace in that format."""
        return trace_to_snapshot(trace) if to_file else None

    def finish(self, result: RunResult, session: Session, snapshot: dict | None) -> None:
        """Add what this backend knows beyond the tracked tensors (allocator numbers, notes)."""

    # ---- timing -------------------------------------------------------------------------------
    def timing_turn(self, emit: Emit) -> ContextManager[None]:
        """Held while the timed pass runs (cuda under the runner service: alone on the GPU)."""
        return nullcontext()

    def timed_pass(self, fn: Callable[[Session], Any], params: dict[str, Any],
                   emit: Emit) -> tuple[Timing | None, dict[str, float]]:
        """Run the variant again without the tracker: (its step times, the metrics it measured).

        The metrics come from a pass of the experiment's own steps (they may depend on how many:
        losses logged, the last loss); when that pass timed fewer than TIMED_STEPS steps and the
        experiment takes a `steps` parameter, a second pass of more steps gives the times."""
        with self.timing_turn(emit):
            # no samples stream from the untracked pass: say what the silence is
            emit({"type": "status", "stage": "timing", "text": "timing pass (untracked)"})
            timing, metrics = self._untracked_pass(fn, params)
            more = timed_params(params)
            if (timing is not None and len(timing.steps_s) < TIMED_STEPS
                    and more.get("steps") != params.get("steps")):
                timing = self._untracked_pass(fn, more)[0] or timing
        return timing, metrics

    def _untracked_pass(self, fn, params: dict[str, Any]) -> tuple[Timing | None, dict[str, float]]:
        from ..session import Session

        self.before_timing()
        torch.manual_seed(0)
        clock = StepClock(self.sync)
        session = Session(self, params, clock=clock)
        try:
            fn(session)
            clock.stop()
        except Exception:
            return None, {}
        return clock.timing(), dict(session.metrics)

    def before_timing(self) -> None:
        """Between the passes (cuda: give the tracked pass's cached segments back)."""

    def second_attempt(self, result: RunResult) -> tuple[Backend, str] | None:
        """When `result` failed because of how it was measured: a backend that measures the
        variant another way, and the note saying so; else None."""
        return None

    # ---- the caching allocator's API, as experiments reach it (run.empty_cache() ...) -----------
    def empty_cache(self) -> bool:
        """`torch.cuda.empty_cache()`; False where it means nothing (the CPU)."""
        return False

    def set_allocator_settings(self, settings: str) -> bool:
        """e.g. "expandable_segments:True" at run time; False where it means nothing."""
        return False

    def memory_counters(self) -> dict[str, int] | None:
        """allocated / reserved now (cuda: measured, plus NVML's used bytes; sim: predicted)."""
        return None

    @property
    def allocator_model(self):
        """Sim's model of the caching allocator (lab.measure.sim.allocator_replay.Replay)."""
        return None

    def stand_in_values(self) -> ContextManager[None]:
        """Inside: `.item()` of a fake tensor answers a stand-in (sim only)."""
        return nullcontext()


__all__ = ["Backend", "Emit"]
