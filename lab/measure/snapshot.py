"""PyTorch memory snapshots (`torch.cuda.memory._snapshot()` / `_dump_snapshot`) -> our model.

A snapshot's `device_traces[d]` is the allocator's own event list: `alloc`, `free_requested`,
`free_completed`, `segment_alloc`/`segment_free` (cudaMalloc/cudaFree of whole segments, i.e.
*reserved* memory), `segment_map`/`segment_unmap` (expandable segments), `oom`, `snapshot`.
Each has `addr`, `size`, `time_us` and (with stacks="python") `frames`.

Both directions live here: `device_trace_timelines` reads the allocator's trace of a cuda run into
our timelines; `trace_to_snapshot` writes a cpu/sim run's `Trace` as a snapshot that
pytorch.org/memory_viz opens. Reading arbitrary snapshot files (safely) is `lab.snapshots`.
"""

from __future__ import annotations

from .result import Timeline
from .trace import ALLOC, FREE, Event, Trace

from . import snapshot_format as fmt

ALLOC_ACTIONS = {fmt.ALLOC}
FREE_ACTIONS = {fmt.FREE}
SEGMENT_UP = set(fmt.SEGMENT_UP)
SEGMENT_DOWN = set(fmt.SEGMENT_DOWN)


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
    from .result_parts import build_timeline  # report imports result; keep this module light

    trace, reserved = device_trace_to_trace(snapshot, phase_us, device)
    if not trace.events:
        return None, None
    allocated = build_timeline(trace)
    allocated.by_category = {}  # the allocator does not know what a block is
    res = Timeline(index=list(range(len(reserved))), t=[t for t, _ in reserved],
                   live=[b for _, b in reserved], events=len(reserved)) if reserved else None
    return allocated, res


# ---- Trace -> snapshot (cpu / sim runs) ---------------------------------------------------------
SYNTH_BASE_ADDR = 0x7F00_0000_0000
SYNTH_ALIGN = 512
SYNTH_NOTE = ("synthesized by memlab from a cpu/sim run: there is no caching allocator, so every "
              "tensor storage is its own segment (reserved = allocated), sizes are exact storage "
              "bytes (no 512-byte rounding), and time_us is the run's clock (meaningless in sim)")


def _frames_from_stack(stack: str, cache: dict[str, list[dict]]) -> list[dict]:
    """'dir/file.py:12 fn' -> [{'filename', 'line', 'name'}], shared between equal stacks (a
    pickle then stores each once, as PyTorch's own snapshots do)."""
    got = cache.get(stack)
    if got is not None:
        return got
    frames: list[dict] = []
    if stack and ":" in stack:
        loc, _, name = stack.partition(" ")
        filename, _, line = loc.rpartition(":")
        try:
            frames = [{"filename": filename, "line": int(line), "name": name}]
        except ValueError:
            frames = [{"filename": loc, "line": 0, "name": name}]
    cache[stack] = frames
    return frames


# the first part of sim's keys for allocations that back no tensor (lab.measure.sim.dispatch.policy)
_EXTRA_NOUNS = {"cublas": "cuBLAS workspace", "cublaslt": "cuBLASLt workspace",
                "cudnn search": "cuDNN benchmark search", "cudnn workspace": "cuDNN workspace",
                "scratch": "kernel scratch", "reduce": "reduction staging",
                "safe_softmax_backward": "softmax backward"}


def extra_name(key) -> str:
    """A readable name for an allocation that backs no tensor, from the key sim gave it:
    ("cublas", "main") -> "cuBLAS workspace (main)"; a bounded request's key wraps its name."""
    key = getattr(key, "name", key)
    if not isinstance(key, tuple) or not key:
        return str(key)
    noun = _EXTRA_NOUNS.get(str(key[0]), str(key[0]))
    return f"{noun} ({', '.join(map(str, key[1:]))})" if len(key) > 1 else noun


def trace_to_snapshot(trace: Trace, device: int = 0) -> dict:
    """A snapshot dict shaped like `torch.cuda.memory._snapshot()` from a cpu/sim `Trace`.

    pytorch.org/memory_viz opens it (`save_snapshot` pickles it with protocol 4):
    every storage is a `segment_alloc` + `alloc` ... `free_requested` + `free_completed` +
    `segment_free`, with its first user frame as the stack. Extra keys the viewer ignores carry
    what we know exactly: `category` (parameters, gradients, ...) and `phase` on each alloc, which
    `memlab view` shows instead of guessing. Zero-byte storages are left out (no allocator would
    hand out a block for them). Sim's allocations that back no tensor (`trace.extras`: cuBLAS and
    cuDNN workspaces, kernel scratch) are blocks of category "other", named by their key.
    """
    entries: list[dict] = []
    next_addr = SYNTH_BASE_ADDR
    live: dict[int, tuple[int, int, list[dict], str]] = {}  # sid -> (addr, size, frames, cat)
    frame_cache: dict[str, list[dict]] = {}

    def place(size: int) -> int:
        nonlocal next_addr
        addr = next_addr
        next_addr += -(-max(size, 1) // SYNTH_ALIGN) * SYNTH_ALIGN  # never reused: unique
        return addr

    def seg(action: str, addr: int, size: int, t_us: int) -> None:
        # category "unknown" on segment events: memory_viz versions that colour by category
        # expect it among the categories (and some crash adding it themselves)
        entries.append({"action": action, "addr": addr, "size": size, "stream": 0,
                        "time_us": t_us, "frames": [], "category": "unknown"})

    extra_live: dict[object, tuple[int, int, list[dict]]] = {}  # key -> (addr, size, frames)

    def place_extra(extra: tuple, t_us: int, phase: str) -> None:
        """sim's allocations that back no tensor (a cuBLAS or cuDNN workspace, kernel scratch):
        blocks of category "other" named by their key, with no Python frame (CUDA's code)."""
        _, kind, key, size = extra
        if kind == "alloc" and size > 0:
            addr = place(size)
            frames = [{"filename": "(CUDA library: no Python frame)", "line": 0,
                       "name": extra_name(key)}]
            seg(fmt.SEGMENT_ALLOC, addr, size, t_us)
            entries.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                            "time_us": t_us, "frames": frames, "category": "other",
                            "phase": phase})
            extra_live[key] = (addr, size, frames)
        elif kind == "free" and key in extra_live:
            addr, size, frames = extra_live.pop(key)
            for action in (fmt.FREE_REQUESTED, fmt.FREE):
                entries.append({"action": action, "addr": addr, "size": size, "stream": 0,
                                "time_us": t_us, "frames": frames, "category": "other"})
            seg(fmt.SEGMENT_FREE, addr, size, t_us)

    if trace.baseline_bytes > 0:  # bytes live before the first event: one block from t=0
        addr = place(trace.baseline_bytes)
        seg(fmt.SEGMENT_ALLOC, addr, trace.baseline_bytes, 0)
        entries.append({"action": "alloc", "addr": addr, "size": trace.baseline_bytes,
                        "stream": 0, "time_us": 0, "frames": [], "category": "other",
                        "phase": "(before tracking)"})
        live[-1] = (addr, trace.baseline_bytes, [], "other")
    last_us, last_phase = 0, ""
    extras = iter(trace.extras)
    extra = next(extras, None)
    for i, e in enumerate(trace.events):
        while extra is not None and extra[0] <= i:  # made before this event: at its time
            place_extra(extra, last_us, last_phase or e.phase)
            extra = next(extras, None)
        last_phase = e.phase
        if e.nbytes <= 0:
            continue
        t_us = max(last_us, int(e.t * 1e6))  # keep time monotone whatever the clock did
        last_us = t_us
        if e.kind == ALLOC:
            addr = place(e.nbytes)
            frames = _frames_from_stack(e.stack, frame_cache)
            cat = trace.category(e.sid)
            seg(fmt.SEGMENT_ALLOC, addr, e.nbytes, t_us)
            entries.append({"action": "alloc", "addr": addr, "size": e.nbytes, "stream": 0,
                            "time_us": t_us, "frames": frames, "category": cat,
                            "phase": e.phase})
            live[e.sid] = (addr, e.nbytes, frames, cat)
        else:
            got = live.pop(e.sid, None)
            if got is None:
                continue
            addr, size, frames, cat = got
            for action in (fmt.FREE_REQUESTED, fmt.FREE):
                entries.append({"action": action, "addr": addr, "size": size, "stream": 0,
                                "time_us": t_us, "frames": frames, "category": cat})
            seg(fmt.SEGMENT_FREE, addr, size, t_us)
    while extra is not None:
        place_extra(extra, last_us, last_phase)
        extra = next(extras, None)
    segments = [
        {"device": device, "address": addr, "total_size": size, "stream": 0,
         "segment_type": "large" if size > 1 << 20 else "small", "segment_pool_id": (0, 0),
         "allocated_size": size, "active_size": size, "requested_size": size,
         "is_expandable": False, "frames": frames,
         "blocks": [{"address": addr, "size": size, "requested_size": size,
                     "state": fmt.ACTIVE_ALLOCATED, "frames": frames, "category": cat}]}
        for addr, size, frames, cat in sorted([*live.values(),
                                               *((a, n, f, "other") for a, n, f in extra_live.values())])
    ]
    traces: list[list[dict]] = [[] for _ in range(device)] + [entries]
    return {"segments": segments, "device_traces": traces, "allocator_settings": {},
            "memlab": {"synthesized": True, "note": SYNTH_NOTE}}


def save_snapshot(snapshot: dict, path: str) -> None:
    """Pickle with protocol 4: the memory_viz page's own unpickler reads protocols 2-4 only."""
    import pickle

    from lab.atomic import atomic_write

    atomic_write(path, pickle.dumps(snapshot, protocol=4))
