"""Trace + session -> the pieces of a `RunResult` (timeline, peak, phases, blocks, checks).

(Named for what it makes, apart from lab.report, the display layer, and lab.report.text.)
"""

from __future__ import annotations

import heapq
from typing import Any

from .formula import evaluate
from .result import Block, Check, Peak, PhaseStats, Timeline
from .trace import ALLOC, CATEGORIES, PhaseRecord, Trace, pick_indices

MAX_TIMELINE_POINTS = 1000
MAX_BLOCKS = 1000  # the largest storages; enough for the inspector, small enough to keep
CUDA_BLOCK = 512  # the caching allocator rounds every block up to a multiple of 512 bytes


def build_timeline(trace: Trace, max_points: int = MAX_TIMELINE_POINTS) -> Timeline:
    events = trace.events
    live_total = trace.baseline_bytes
    cat_live = {c: 0 for c in CATEGORIES}
    total: list[int] = []
    per_cat: dict[str, list[int]] = {c: [] for c in CATEGORIES}
    for e in events:
        cat = trace.category(e.sid)
        sign = 1 if e.kind == ALLOC else -1
        live_total += sign * e.nbytes
        cat_live[cat] += sign * e.nbytes
        total.append(live_total)
        for c in CATEGORIES:
            per_cat[c].append(cat_live[c])
    keep = pick_indices(total, max_points)
    starts: list[tuple[str, int]] = []
    for i, e in enumerate(events):
        if e.phase and (not starts or starts[-1][0] != e.phase):
            starts.append((e.phase, i))
    return Timeline(
        index=keep,
        t=[round(events[i].t, 6) for i in keep],
        live=[total[i] for i in keep],
        by_category={c: [per_cat[c][i] for i in keep] for c in CATEGORIES if any(per_cat[c])},
        phase_starts=starts,
        events=len(events),
    )


def series_timelines(allocated: list[tuple[int, int]], reserved: list[tuple[int, int]],
                     max_points: int = 1000) -> tuple[Timeline | None, Timeline | None]:
    """(x, bytes) step series -> downsampled `Timeline`s (sim's predicted allocator curves)."""
    def one(series):
        if not series:
            return None
        ys = [b for _, b in series]
        keep = pick_indices(ys, max_points)
        return Timeline(index=[series[i][0] for i in keep], t=[], live=[ys[i] for i in keep],
                        events=len(series))

    return one(allocated), one(reserved)


def build_blocks(trace: Trace) -> list[Block]:
    """Every storage (largest first, capped) with its lifetime on the event axis."""
    alloc: dict[int, tuple[int, Any]] = {}
    lives: list[tuple[int, Any, int | None]] = []  # (alloc index, its event, free index)
    for i, e in enumerate(trace.events):
        if e.kind == ALLOC:
            alloc[e.sid] = (i, e)
        elif e.sid in alloc:
            j, a = alloc.pop(e.sid)
            lives.append((j, a, i))
    lives.extend((j, a, None) for j, a in alloc.values())
    # only the kept ones become Blocks (a decode loop has tens of thousands of storages);
    # nsmallest is sorted(...)[:n], and alloc indices are unique, so the order is the same
    kept = heapq.nsmallest(MAX_BLOCKS, lives, key=lambda life: (-life[1].nbytes, life[0]))
    return [Block(a.nbytes, trace.category(a.sid), a.phase, j, i, a.stack) for j, a, i in kept]


def build_peak(trace: Trace, top_n: int = 12) -> Peak:
    idx = trace.peak_index()
    if idx < 0:
        return Peak(bytes=trace.baseline_bytes)
    live = trace.live_at(idx)
    born = {e.sid: i for i, e in enumerate(trace.events[: idx + 1]) if e.kind == ALLOC}
    top = sorted(live.values(), key=lambda e: -e.nbytes)[:top_n]
    return Peak(
        bytes=sum(e.nbytes for e in live.values()) + trace.baseline_bytes,
        phase=trace.events[idx].phase,
        index=idx,
        by_category={k: v for k, v in trace.by_category(live).items() if v},
        top=[Block(e.nbytes, trace.category(e.sid), e.phase, born[e.sid], None, e.stack)
             for e in top],
    )


def build_phases(records: list[PhaseRecord], trace: Trace | None = None) -> list[PhaseStats]:
    out = []
    for r in records:
        ps = PhaseStats(
            name=r.name,
            start_bytes=r.start_bytes,
            end_bytes=r.end_bytes,
            peak_bytes=max(r.peak_bytes, r.start_bytes, r.end_bytes),
            delta_bytes=r.end_bytes - r.start_bytes,
            start_index=r.start_index,
            end_index=r.end_index,
            duration_s=r.duration_s,
        )
        if r.cuda:
            ps.allocated_delta_bytes = r.cuda["end_allocated"] - r.cuda["start_allocated"]
            ps.allocated_peak_bytes = r.cuda["peak_allocated"]
            ps.reserved_bytes = r.cuda["reserved"]
        if r.new_blocks is not None and trace is not None:
            ptrs = {e.ptr for e in trace.events[r.start_index:r.end_index] if e.kind == ALLOC}
            ps.tensor_block_bytes = sum(n for a, n in r.new_blocks.items() if a in ptrs)
            ps.other_block_sizes = sorted((n for a, n in r.new_blocks.items() if a not in ptrs),
                                          reverse=True)
        out.append(ps)
    return out


def category_at(trace: Trace, index: int) -> dict[str, int]:
    return trace.by_category(trace.live_at(index)) if index >= 0 else {}


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _cuda_delta_note(blocks: int, tensors: int, ph: PhaseStats) -> str:
    """Name every byte between numel × itemsize and what memory_allocated() grew by."""
    parts = []
    if blocks != tensors:
        parts.append(f"the allocator's blocks hold {blocks - tensors:+,} B beyond the tensors' "
                     f"numel × itemsize (requests round up to {CUDA_BLOCK} B, and a large block "
                     f"keeps the unsplit rest of its segment)")
    other = ph.other_block_sizes or []
    if other:
        parts.append(f"the phase also allocated {sum(other):,} B that back no tensor ("
                     + ", ".join(_mib(n) for n in other[:4])
                     + "; e.g. the cuBLAS workspace made by the first matmul)")
    if ph.allocated_delta_bytes is not None and parts:
        parts.append(f"memory_allocated() grew by {ph.allocated_delta_bytes:,} B in all")
    return "; ".join(parts)


def build_checks(specs: list[dict], variant: str, params: dict, trace: Trace,
                 phases: list[PhaseStats], cuda: bool) -> list[Check]:
    """Evaluate lesson.toml `[[checks]]` for this variant. See lab.course.curriculum for the fields."""
    out = []
    by_name = {p.name: p for p in phases}
    for spec in specs:
        if spec.get("variants") and variant not in spec["variants"]:
            continue
        ph = by_name.get(spec["phase"])
        if ph is None:
            continue  # the variant stopped (OOM) before this phase: nothing to compare
        expected = int(evaluate(spec["expected"], params))
        measure = spec.get("measure", "delta")
        note, tracked = "", 0
        if measure == "delta":
            tracked = ph.delta_bytes
            if cuda and ph.allocated_delta_bytes is not None and ph.other_block_sizes is not None:
                # what memory_allocated() gained, less the blocks that back no tensor
                measured = ph.allocated_delta_bytes - sum(ph.other_block_sizes)
                source = "CUDA allocator: memory_allocated delta of this phase's tensors"
                note = _cuda_delta_note(measured, tracked, ph)
            elif cuda and ph.allocated_delta_bytes is not None:
                measured, source = ph.allocated_delta_bytes, "CUDA allocator (memory_allocated delta)"
            else:
                measured, source = tracked, "tracked tensors (numel × itemsize)"
        elif measure.startswith("category:"):
            cat = measure.split(":", 1)[1]
            measured = category_at(trace, ph.end_index - 1).get(cat, 0)
            source = f"tracked {cat} live at the end of {ph.name}"
        elif measure == "peak":
            measured, source = ph.peak_bytes, "tracked peak in phase"
            if cuda and ph.allocated_peak_bytes is not None:
                measured, source = ph.allocated_peak_bytes, "CUDA allocator peak in phase"
        else:
            raise ValueError(f"unknown check measure {measure!r}")
        out.append(Check(spec["name"], expected, measured, source, note,
                         tensor_bytes=tracked if cuda and measure == "delta" else None))
    return out
