"""The trace model: alloc/free events and everything derived from them.

A `Trace` is the raw record of one measured run: every storage born and freed, in order. From it
come the live-bytes timeline, the peak (and what was live there, by category), and per-phase
numbers. `RunResult` (in `result.py`) carries a downsampled timeline, never the raw events, so it
stays small enough to stream over a pipe and to keep in run history.

Bytes are always plain ints; GB (10**9) / GiB (2**30) appear only in display code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.report.downsample import peak_indices

CATEGORIES = (
    "parameters",
    "gradients",
    "optimizer_state",
    "activations",
    "temporaries",
    "inputs",
    "other",
)

ALLOC, FREE = "alloc", "free"


@dataclass
class PhaseRecord:
    """One phase as the run's session recorded it (lab.measure.session): where it starts and
    ends in the trace, its bytes, and what its backend read at its edges."""

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


@dataclass(slots=True)
class Event:
    """One storage born (`alloc`) or freed (`free`). `sid` pairs the two."""

    kind: str  # ALLOC | FREE
    sid: int  # storage id, unique within a trace
    nbytes: int
    t: float  # seconds since the trace started (wall clock; meaningless but monotone in sim)
    phase: str
    stack: str = ""  # short "file:line fn" of the first user frame, alloc only
    ptr: int = 0  # the storage's device address (CUDA only): matches it to allocator blocks


@dataclass
class Trace:
    events: list[Event] = field(default_factory=list)
    # sid -> category, decided after the run (what the storage turned out to be)
    categories: dict[int, str] = field(default_factory=dict)
    # phases in the order they started: (name, t_start, t_end)
    phases: list[tuple[str, float, float]] = field(default_factory=list)
    baseline_bytes: int = 0  # bytes live before the first event (tensors that pre-existed)
    # sim: allocations CUDA makes that back no tensor (cuBLAS workspaces, kernel scratch), as
    # (position, "alloc" | "free", key, nbytes): made after the first `position` events
    extras: list[tuple[int, str, object, int]] = field(default_factory=list)

    def category(self, sid: int) -> str:
        return self.categories.get(sid, "other")

    # ---- derived views -------------------------------------------------------------------
    def live_series(self) -> list[int]:
        """Live bytes after each event."""
        live = self.baseline_bytes
        out = []
        for e in self.events:
            live += e.nbytes if e.kind == ALLOC else -e.nbytes
            out.append(live)
        return out

    def peak_index(self) -> int:
        """Index of the first event at which live bytes reach their maximum (-1 if no events)."""
        best, idx, live = self.baseline_bytes, -1, self.baseline_bytes
        for i, e in enumerate(self.events):
            live += e.nbytes if e.kind == ALLOC else -e.nbytes
            if live > best:
                best, idx = live, i
        return idx

    def live_at(self, index: int) -> dict[int, Event]:
        """The alloc events of storages live just after event `index` (sid -> alloc event)."""
        live: dict[int, Event] = {}
        for e in self.events[: index + 1]:
            if e.kind == ALLOC:
                live[e.sid] = e
            else:
                live.pop(e.sid, None)
        return live

    def by_category(self, live: dict[int, Event]) -> dict[str, int]:
        totals = {c: 0 for c in CATEGORIES}
        for sid, e in live.items():
            totals[self.category(sid)] += e.nbytes
        return totals


def pick_indices(ys: list[int], max_points: int) -> list[int]:
    """Indices of a series to keep when storing it with ~max_points: the first, the last, and
    the max *and* min of each bucket, in order — so a peak (or a dip between steps) survives
    and the curve still reads left to right (lab.report.downsample: the one rule)."""
    return peak_indices(ys, max_points, lows=True)
