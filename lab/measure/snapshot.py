"""PyTorch memory snapshots (`torch.cuda.memory._snapshot()` / `_dump_snapshot`) -> our model.

A snapshot's `device_traces[d]` is the allocator's own event list: `alloc`, `free_requested`,
`free_completed`, `segment_alloc`/`segment_free` (cudaMalloc/cudaFree of whole segments, i.e.
*reserved* memory), `segment_map`/`segment_unmap` (expandable segments), `oom`, `snapshot`.
Each has `addr`, `size`, `time_us` and (with stacks="python") `frames`.
"""

from __future__ import annotations

from .result import Timeline
from .trace import ALLOC, FREE, Event, Trace

ALLOC_ACTIONS = {"alloc"}
FREE_ACTIONS = {"free_completed"}
SEGMENT_UP = {"segment_alloc", "segment_map"}
SEGMENT_DOWN = {"segment_free", "segment_unmap"}


def first_frame(frames: list[dict] | None) -> str:
    for fr in frames or []:
        name = fr.get("filename", "")
        if name and "/torch/" not in name and "/lab/measure/" not in name and not name.startswith(("??", "<frozen")):
            return f"{'/'.join(name.split('/')[-2:])}:{fr.get('line', 0)} {fr.get('name', '')}"
    return ""


def _phase_at(phase_us: list[tuple[str, int]], t_us: int) -> str:
    name = ""
    for n, start in phase_us:
        if start <= t_us:
            name = n
        else:
            break
    return name


def device_trace_to_trace(snapshot: dict, phase_us: list[tuple[str, int]] | None = None,
                          device: int = 0) -> tuple[Trace, list[tuple[float, int]]]:
    """Allocated-bytes trace (blocks as the allocator saw them) and the reserved series."""
    traces = snapshot.get("device_traces") or []
    entries = traces[device] if device < len(traces) else []
    phase_us = phase_us or []
    trace = Trace()
    t0 = entries[0]["time_us"] if entries and "time_us" in entries[0] else 0
    sid_by_addr: dict[int, tuple[int, int]] = {}
    reserved, reserved_series, next_sid = 0, [], 0
    for ent in entries:
        action, size, t_us = ent.get("action"), int(ent.get("size", 0)), int(ent.get("time_us", 0))
        t = (t_us - t0) / 1e6
        phase = _phase_at(phase_us, t_us)
        if action in ALLOC_ACTIONS:
            sid_by_addr[ent["addr"]] = (next_sid, size)
            trace.events.append(Event(ALLOC, next_sid, size, t, phase, first_frame(ent.get("frames"))))
            next_sid += 1
        elif action in FREE_ACTIONS and ent.get("addr") in sid_by_addr:
            sid, nbytes = sid_by_addr.pop(ent["addr"])
            trace.events.append(Event(FREE, sid, nbytes, t, phase))
        elif action in SEGMENT_UP or action in SEGMENT_DOWN:
            reserved += size if action in SEGMENT_UP else -size
            reserved_series.append((t, reserved))
    return trace, reserved_series


def device_trace_timelines(snapshot: dict, phase_us: list[tuple[str, int]], device: int = 0
                           ) -> tuple[Timeline | None, Timeline | None]:
    from .report import build_timeline  # report imports result; keep this module light

    trace, reserved = device_trace_to_trace(snapshot, phase_us, device)
    if not trace.events:
        return None, None
    allocated = build_timeline(trace)
    allocated.by_category = {}  # the allocator does not know what a block is
    res = Timeline(index=list(range(len(reserved))), t=[t for t, _ in reserved],
                   live=[b for _, b in reserved], events=len(reserved)) if reserved else None
    return allocated, res
