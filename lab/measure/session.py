"""`Session`: the `run` object an experiment receives.

Experiments are plain PyTorch; the session gives them their sizes (`run.p`), the device, and
`run.phase(...)` to mark where they are. The same experiment code runs in three modes; the
session hides the difference by asking its backend (lab.measure.backends): tracker on or off,
CUDA counters or not, fake tensors or real.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Callable, Iterable

import torch

from .torch_compat import disable_current_modes
from .trace import PhaseRecord
from .tracker import TensorTracker

if TYPE_CHECKING:
    from .backends.base import Backend
    from .timing import StepClock


class Session:
    """What `experiment.py` functions see as `run`.

    `backend`: how this run is measured (its `name` is the mode: cuda | cpu | sim). In sim every
    tensor is a FakeTensor: shapes and bytes are exact, values do not exist (`run.item()`
    returns None), and nothing is timed. The tracked pass has a `tracker`; the timed pass has a
    `clock` (lab.measure.timing) and no tracker.
    """

    def __init__(
        self,
        backend: Backend,
        params: dict[str, Any],
        tracker: TensorTracker | None = None,
        on_phase: Callable[[str], None] | None = None,
        checked_phases: Iterable[str] = (),
        clock: StepClock | None = None,
    ):
        self.backend = backend
        self.mode = backend.name
        self.p = SimpleNamespace(**params)
        self.params = dict(params)
        self.device = backend.device
        self.tracker = tracker
        self.phases: list[PhaseRecord] = []
        self.metrics: dict[str, float] = {}
        self.notes: list[str] = []
        self._on_phase = on_phase
        self._clock = clock
        self._current: PhaseRecord | None = None
        self.kept_snapshot: dict | None = None  # see keep_snapshot
        self.used_untracked = False  # see untracked(): the run's numbers are the allocator's
        # phases whose allocator blocks are diffed (cuda): only those a lesson checks, since a
        # memory_snapshot() walks every segment and is too slow to take at every boundary
        self._checked_phases = set(checked_phases)

    @classmethod
    def for_mode(cls, mode: str, params: dict[str, Any] | None = None,
                 tracker: TensorTracker | None = None) -> Session:
        """A session on `mode`'s backend with no measurement around it (tests, tools)."""
        from .backends import backend_for

        return cls(backend_for(mode), params or {}, tracker)

    # ---- what experiments use -------------------------------------------------------------
    @property
    def simulated(self) -> bool:
        return self.backend.info.simulated

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def cuda_kernels(self) -> bool:
        """CUDA's kernels' paths are taken (what they save, their workspaces, torch.cuda's
        allocator API answered): on a GPU, and in sim, which stands for one. A check's formula
        reads the same fact as `cuda_kernels` (lab.measure.modes)."""
        return self.backend.info.cuda_kernels

    @property
    def rank(self) -> int:
        """This process's rank when the runner started several (RunRequest.ranks), else 0."""
        import torch.distributed as dist

        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0

    @property
    def world_size(self) -> int:
        import torch.distributed as dist

        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    @contextmanager
    def phase(self, name: str, *, category: str | None = None, setup: bool = False):
        """Mark a phase. `category`: what every storage born here is (e.g. "inputs").

        `setup=True` phases (building the model, making data) are left out of `step_time_s`.
        """
        if self._current is not None:
            raise RuntimeError(f"phase {name!r} started inside phase {self._current.name!r}")
        clock, tr = self._clock, self.tracker
        if clock is not None:
            clock.phase_start(name, setup)  # the timed pass synchronizes at steps' edges only
        else:
            self.sync()
        rec = PhaseRecord(
            name=name,
            setup=setup,
            t_start=time.perf_counter(),
            start_index=len(tr.trace.events) if tr else 0,
            start_bytes=tr.live_bytes if tr else 0,
        )
        if tr is not None:
            tr.phase = name
            if category:
                tr.phase_category[name] = category
            tr.peak_bytes = tr.live_bytes  # per-phase peak; the global peak comes from the trace
            self.backend.phase_begin(rec, name in self._checked_phases)
        self._current = rec
        if self._on_phase:
            self._on_phase(name)
        try:
            yield rec
        finally:
            if clock is not None:
                clock.phase_end(name, setup)
            else:
                self.sync()
            rec.t_end = time.perf_counter()
            rec.duration_s = rec.t_end - rec.t_start
            if tr is not None:
                tr.scan_roots()
                rec.end_index = len(tr.trace.events)
                rec.end_bytes = tr.live_bytes
                rec.peak_bytes = tr.peak_bytes
                tr.trace.phases.append((name, rec.t_start - tr._t0, rec.t_end - tr._t0))
                tr.phase = ""
                self.backend.phase_end(rec)
            self.phases.append(rec)
            self._current = None

    # ---- torch.compile ----------------------------------------------------------------------
    @property
    def compiles(self) -> bool:
        """torch.compile's code runs compiled here: on a GPU. In sim a compiled function runs
        eagerly (Inductor's kernels cannot run on fake tensors); the CPU mode runs it eagerly
        too (Inductor's CPU code is not the GPU's, and needs a C++ compiler)."""
        return self.backend.info.on_gpu

    def compile(self, fn, **kwargs):
        """`torch.compile(fn, **kwargs)` where compiled code runs (`compiles`); elsewhere `fn`
        itself, and the result says that these are the eager version's numbers."""
        if self.compiles:
            return torch.compile(fn, **kwargs)
        note = (f"{self.backend.info.label}: torch.compile ran eagerly (Inductor's kernels "
                "need a GPU): these numbers are the eager step's, not the compiled one's; the "
                "GPU's recording has the compiled run")
        if note not in self.notes:  # once, however many functions the run compiles
            self.note(note)
        return fn

    @contextmanager
    def untracked(self):
        """Code inside runs without the tracker's dispatch mode, as it does without the lab.

        Dynamo does not compile while a dispatch mode is on: under the tracker a compiled model
        runs its eager version. On a GPU the allocator's counters and history still see every
        allocation, so a run that used this takes its numbers from them (the phases' bytes,
        the peak and the timeline: lab.measure.allocator_view); the tensors' categories are
        then unknown. In sim and on the CPU nothing changes (the tracker is what measures)."""
        if self.tracker is None or self.backend.info.allocator != "measured":
            yield
            return
        self.used_untracked = True
        with disable_current_modes():
            yield

    def watch(self, *objs) -> None:
        """Tell the tracker about a model or optimizer built before tracking (rarely needed)."""
        if self.tracker is not None:
            self.tracker.watch(*objs)

    def mark(self, tensors, category: str) -> None:
        """Label tensors explicitly, e.g. `run.mark(x, "inputs")`."""
        if self.tracker is not None:
            self.tracker.mark(tensors, category)

    def metric(self, name: str, value: float | None) -> None:
        """Record a number the lesson reports (a loss, a gradient difference, tokens/s)."""
        if value is not None:
            self.metrics[name] = float(value)

    def keep_snapshot(self, snapshot: dict | None) -> None:
        """Hand the lab a memory snapshot this experiment made itself (a lesson that records the
        allocator history on its own: scale parameter `memory_history = "experiment"`). On CUDA
        the lab draws its allocator timeline from it; `--snapshot FILE` saves it in any mode."""
        self.kept_snapshot = snapshot

    def note(self, text: str) -> None:
        self.notes.append(text)

    def item(self, t: torch.Tensor) -> float | None:
        """`t.item()`, or None in simulation where tensors have no values."""
        return None if self.simulated else t.item()

    @contextmanager
    def stand_in_values(self, why: str):
        """Code inside reads tensor values only for Python scalars that size nothing (`why` says
        which and why). In sim `.item()` of a fake tensor then answers a stand-in (1) instead of
        failing, and the result notes `why`; in cpu/cuda nothing changes."""
        if self.simulated:
            note = f"sim: stand-in values (1) for .item(): {why}"
            if note not in self.notes:
                self.note(note)
        with self.backend.stand_in_values():
            yield

    def real_values(self):
        """Code inside makes real tensors, with values: for a constant a library computes once
        from values (torchao's 256-entry quantization map, with .tolist()) that sizes nothing
        on the GPU. In sim it runs outside the fake mode; in cpu/cuda nothing changes."""
        return self.backend.real_values()

    # ---- the caching allocator, in every mode --------------------------------------------------
    # Lessons about the allocator call these instead of torch.cuda.* so that sim takes the same
    # path: on CUDA the real allocator, in sim the allocator model, on the CPU nothing (False/None).
    def empty_cache(self) -> bool:
        """`torch.cuda.empty_cache()`: give cached, unused segments back to the driver."""
        return self.backend.empty_cache()

    def set_allocator_settings(self, settings: str) -> bool:
        """e.g. "expandable_segments:True" at run time; False where it means nothing (CPU)."""
        return self.backend.set_allocator_settings(settings)

    def memory_counters(self) -> dict[str, int] | None:
        """allocated / reserved now (cuda: the allocator, plus NVML's used bytes of the whole GPU
        when NVML answers; sim: the model's prediction); None on the CPU."""
        return self.backend.memory_counters()

    @property
    def allocator_model(self):
        """Sim's model of the caching allocator (lab.measure.sim.allocator.replay.Replay), the
        one the tracker feeds; None in cpu and cuda."""
        return self.backend.allocator_model

    def allocator_stats(self):
        """The allocator model's counters in sim (lab.measure.sim.allocator.model.Stats:
        num_alloc_retries, peaks, ...); None elsewhere (on CUDA ask torch.cuda.memory_stats)."""
        model = self.backend.allocator_model
        return model.model.stats if model is not None else None

    def sync(self) -> None:
        self.backend.sync()
