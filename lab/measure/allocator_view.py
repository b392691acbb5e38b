"""A run whose steps ran outside the tracker (`run.untracked()`, e.g. torch.compile's graphs):
its numbers taken from the CUDA allocator's counters and history instead of the tracked tensors.

The tracker cannot see inside a compiled graph (Dynamo does not compile under a dispatch mode),
so for such a run the allocator is the only witness of every step: each phase's start, end and
peak are what `memory_allocated()` and `max_memory_allocated()` read at its edges (the backend
resets the peak at every phase), the run's peak is the allocator's, and the timeline is the
allocator's history. The tensors' categories are not known there, and say so.
"""

from __future__ import annotations

from .result import Peak, RunResult
from .trace import PhaseRecord

# what a result measured so says first (recordings carry it: its wording after this stays free)
MARK = "measured by the CUDA allocator's counters and history, not the tensor tracker"
NOTE = (MARK + ": the steps ran untracked (the tracker is a dispatch mode, under which "
        "torch.compile runs the eager version), so bytes include the allocator's 512 B rounding "
        "and workspaces, and no tracker saw what each block holds (parameters, activations...)")
# how CudaBackend.finish's note on the allocator's peak above the tracked one starts: meaningless
# where the allocator is all that measured
UNTRACKED_PEAK_NOTE = "The CUDA allocator's peak is"


def measured_by_allocator(result: RunResult) -> bool:
    """Did `from_allocator` make this result's numbers (the app and the cited tables say so)?"""
    return any(n.startswith(MARK) for n in result.notes)


def from_allocator(result: RunResult, records: list[PhaseRecord]) -> None:
    """Replace the tracked numbers of `result` by the allocator's (module docstring)."""
    a = result.allocator
    if a is None:
        return
    starts = dict(a.timeline.phase_starts) if a.timeline is not None else {}
    for i, (ps, rec) in enumerate(zip(result.phases, records)):
        c = rec.cuda
        if not c:
            continue
        ps.start_bytes, ps.end_bytes = c["start_allocated"], c["end_allocated"]
        ps.peak_bytes = max(c["peak_allocated"], ps.start_bytes, ps.end_bytes)
        ps.delta_bytes = ps.end_bytes - ps.start_bytes
        if a.timeline is not None:
            ps.start_index = starts.get(ps.name, ps.start_index)
            later = [starts[p.name] for p in result.phases[i + 1:] if p.name in starts]
            ps.end_index = later[0] if later else a.timeline.events
    at_peak = max(result.phases, key=lambda p: p.peak_bytes, default=None)
    result.peak = Peak(bytes=a.peak_allocated_bytes, phase=at_peak.name if at_peak else "")
    if a.timeline is not None:
        result.timeline = a.timeline
    result.blocks = []
    a.untracked_peak_bytes = 0
    result.notes = [n for n in result.notes if not n.startswith(UNTRACKED_PEAK_NOTE)] + [NOTE]


__all__ = ["MARK", "NOTE", "UNTRACKED_PEAK_NOTE", "from_allocator", "measured_by_allocator"]
