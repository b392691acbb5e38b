"""`Backend`: one way of measuring (a mode), behind the interface `measure` runs a variant over.

A backend answers everything that differs between cuda, cpu and sim, so that nothing outside
`lab/measure/backends/`, `lab/measure/backends/sim.py` and the mode rule (lab.measure.modes)
decides by a mode's name:

- the device experiments make tensors on, and what the result says it was (`device_info`);
- the tensor tracker and who it tells of every allocation (`new_tracker`: sim's allocator model,
  the cpu backend's virtual-GPU guard);
- the context a run executes in (`running`: sim's fake tensors and CUDA's paths) and the one a
  tracked pass is measured in (`measuring`: a GPU turn, the allocator's history);
- what a phase boundary reads (`phase_begin` / `phase_end`: the CUDA allocator's counters);
- the allocator's numbers (`finish`: measured on CUDA, predicted in sim, none on the CPU);
- the timed pass's turn and clock (`timing_turn`, `before_timing`, `sync`; the pass itself is
  lab.measure.measure's), and a second attempt when the first one's failure was the lab's own
  doing (`second_attempt`);
- torch.distributed's ranks where this process stands for all of them (`simulated_ranks`: sim's
  fake process group, lab.measure.sim.ranks);
- the caching allocator's API as experiments reach it (`run.empty_cache()` etc.).

The defaults here are "nothing": a backend overrides what it has.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator

import torch

from ..modes import ModeInfo, mode_info
from ..result import DeviceInfo, RunResult
from ..snapshot import trace_to_snapshot
from ..trace import PhaseRecord, Trace
from ..tracker import TensorTracker

if TYPE_CHECKING:
    from ..distributed import Ranks

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

    def snapshot(self, trace: Trace, to_file: bool, at_oom: bool = False) -> dict | None:
        """The run as a memory_viz snapshot: the allocator's own history where it was recorded,
        else (only when a file is asked for) the tracker's trace in that format. `at_oom`: the
        run ended in an out-of-memory (a backend that took a snapshot there returns that one)."""
        return trace_to_snapshot(trace) if to_file else None

    def finish(self, result: RunResult, phases: list[PhaseRecord], snapshot: dict | None) -> None:
        """Add what this backend knows beyond the tracked tensors (allocator numbers, notes)."""

    # ---- timing -------------------------------------------------------------------------------
    def timing_turn(self, emit: Emit) -> ContextManager[None]:
        """Held while the timed pass runs (cuda under the runner service: alone on the GPU)."""
        return nullcontext()

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
        """Sim's model of the caching allocator (lab.measure.sim.allocator.replay.Replay)."""
        return None

    def stand_in_values(self) -> ContextManager[None]:
        """Inside: `.item()` of a fake tensor answers a stand-in (sim only)."""
        return nullcontext()

    def real_values(self) -> ContextManager[None]:
        """Inside: tensors are made with values (sim: outside the fake mode)."""
        return nullcontext()

    # ---- torch.distributed ----------------------------------------------------------------------
    def simulated_ranks(self, run, world_size: int, device_type: str
                        ) -> ContextManager[Ranks] | None:
        """Where this process stands for every rank (sim: the fake process group), the context
        `run` is one rank of `world_size` in; None where ranks are real processes
        (lab.measure.distributed.join joins their group)."""
        return None


__all__ = ["Backend", "Emit"]
