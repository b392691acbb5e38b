"""`Session`: the `run` object an experiment receives.

Experiments are plain PyTorch; the session gives them their sizes (`run.p`), the device, and
`run.phase(...)` to mark where they are. The same experiment code runs in three modes; the
session hides the difference (tracker on or off, CUDA counters or not, fake tensors or real).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Callable

import torch

from .tracker import TensorTracker


@dataclass
class PhaseRecord:
    name: str
    setup: bool
    t_start: float
    start_index: int
    start_bytes: int
    t_end: float = 0.0
    end_index: int = 0
    end_bytes: int = 0
    peak_bytes: int = 0
    duration_s: float = 0.0
    cuda: dict[str, int] = field(default_factory=dict)
    new_blocks: dict[int, int] | None = None  # cuda: address -> size of blocks born and kept


def _new_blocks(before: dict[int, int], device: int) -> dict[int, int]:
    from .cuda import active_blocks

    return {a: n for a, n in active_blocks(device).items() if before.get(a) != n}


class Session:
    """What `experiment.py` functions see as `run`.

    mode: "cuda" | "cpu" | "sim". In "sim" every tensor is a FakeTensor: shapes and bytes are
    exact, values do not exist (`run.item()` returns None), and nothing is timed.
    """

    def __init__(
        self,
        mode: str,
        params: dict[str, Any],
        device: torch.device,
        tracker: TensorTracker | None = None,
        cuda_stats: Callable[[], dict[str, int]] | None = None,
        on_phase: Callable[[str], None] | None = None,
        block_phases: set[str] | None = None,
    ):
        self.mode = mode
        self.p = SimpleNamespace(**params)
        self.params = dict(params)
        self.device = device
        self.tracker = tracker
        self.phases: list[PhaseRecord] = []
        self.metrics: dict[str, float] = {}
        self.notes: list[str] = []
        self._cuda_stats = cuda_stats
        self._on_phase = on_phase
        self._current: PhaseRecord | None = None
        self.kept_snapshot: dict | None = None  # see keep_snapshot
        # phases whose allocator blocks are diffed (cuda): only those a lesson checks, since a
        # memory_snapshot() walks every segment and is too slow to take at every boundary
        self._block_phases = block_phases or set()

    # ---- what experiments use -------------------------------------------------------------
    @property
    def simulated(self) -> bool:
        return self.mode == "sim"

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

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
        self.sync()
        tr = self.tracker
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
        blocks_before = None
        if self._cuda_stats is not None:
            if name in self._block_phases:
                from .cuda import active_blocks

                blocks_before = active_blocks(self.device.index or 0)
            torch.cuda.reset_peak_memory_stats()
            rec.cuda["start_allocated"] = self._cuda_stats()["allocated"]
        self._current = rec
        if self._on_phase:
            self._on_phase(name)
        try:
            yield rec
        finally:
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
            if self._cuda_stats is not None:
                s = self._cuda_stats()
                rec.cuda.update(end_allocated=s["allocated"], peak_allocated=s["peak_allocated"],
                                reserved=s["reserved"], peak_reserved=s["peak_reserved"])
                if blocks_before is not None:
                    rec.new_blocks = _new_blocks(blocks_before, self.device.index or 0)
            self.phases.append(rec)
            self._current = None

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
        policy = getattr(self.tracker, "policy", None) if self.simulated else None
        if policy is None:
            yield
            return
        note = f"sim: stand-in values (1) for .item(): {why}"
        if note not in self.notes:
            self.note(note)
        with policy.stand_in_values():
            yield

    # ---- the caching allocator, in every mode --------------------------------------------------
    # Lessons about the allocator call these instead of torch.cuda.* so that sim takes the same
    # path: on CUDA the real allocator, in sim the allocator model, on the CPU nothing (False/None).
    def empty_cache(self) -> bool:
        """`torch.cuda.empty_cache()`: give cached, unused segments back to the driver."""
        if self.is_cuda or self.simulated:
            torch.cuda.empty_cache()  # sim: lab.measure.sim.policy routes it to the model
            return True
        return False

    def set_allocator_settings(self, settings: str) -> bool:
        """e.g. "expandable_segments:True" at run time; False where it means nothing (CPU)."""
        if self.simulated:
            torch.cuda.memory._set_allocator_settings(settings)  # routed to the model in sim
            return True
        if self.is_cuda:
            from .cuda import set_allocator_settings

            return set_allocator_settings(settings)
        return False

    def memory_counters(self) -> dict[str, int] | None:
        """allocated / reserved now (cuda: the allocator, plus NVML's used bytes of the whole GPU
        when NVML answers; sim: the model's prediction); None on the CPU."""
        if self.is_cuda and not self.simulated:
            from .cuda import nvml_used_bytes

            out = {"allocated": torch.cuda.memory_allocated(self.device),
                   "reserved": torch.cuda.memory_reserved(self.device)}
            used = nvml_used_bytes(self.device.index or 0)
            if used is not None:
                out["nvml_used"] = used
            return out
        alloc = getattr(self.tracker, "allocator", None) if self.simulated else None
        if alloc is None:
            return None
        return {"allocated": alloc.model.stats.allocated, "reserved": alloc.model.stats.reserved}

    def allocator_stats(self):
        """The allocator model's counters in sim (lab.measure.sim.allocator.Stats: num_alloc_retries,
        peaks, ...); None elsewhere (on CUDA ask torch.cuda.memory_stats)."""
        alloc = getattr(self.tracker, "allocator", None) if self.simulated else None
        return alloc.model.stats if alloc is not None else None

    def sync(self) -> None:
        if self.device.type == "cuda" and not self.simulated:
            torch.cuda.synchronize(self.device)
