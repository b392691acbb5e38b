"""A real allocator trace replayed through the model, from any starting state, under any settings
and limit: "would this out-of-memory have fit with `expandable_segments:True`?" (`memlab view`).

The input is what a memory snapshot records (`torch.cuda.memory._snapshot()["device_traces"]`),
already read into tuples by lab.snapshots.replay: `(action, addr, size, stream)`, and the state
the trace starts from (`StartSegment`s: a ring buffer of `max_entries` drops the program's first
events, so the segments and live blocks of that moment are rebuilt from the snapshot's `segments`).

    r = replay_trace(events, start=segments, settings=parse_alloc_conf("expandable_segments:True"),
                     cap=10 * 2**30, stop=oom_index)
    r.served, r.failed_at, r.peak_reserved, r.retries

Only what the program asked for is replayed: `alloc` (a request, on its stream), `free_completed`
(the block back in the cache: the moment another stream's use ended, so cross-stream frees and
`record_stream` need nothing more), `oom` (the request that failed on the GPU) and `segment_map`
(expandable segments switched on at run time). `segment_alloc`/`segment_free` are the
allocator's own decisions: the model makes its own. New segments take the GPU's addresses in the
order the trace names them (best fit breaks ties by address), then synthetic ones.

Torch-free, so the snapshot reader (lab.snapshots, no torch) can use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain, count
from typing import Iterable, Sequence

from ... import snapshot_format as fmt
from .model import SMALL_BUFFER, AllocatorOutOfMemory, Block, CachingAllocatorModel, H200_TOTAL
from .settings import AllocatorSettings


class NotReplayable(ValueError):
    """The trace asks for something the model does not have; one line saying what."""


@dataclass(frozen=True)
class StartSegment:
    """A segment that existed before the trace's first entry (cudaMalloc'd, not expandable)."""

    address: int
    size: int
    stream: int = 0
    live: tuple[tuple[int, int], ...] = ()  # (address, size) of its blocks live then, any order
    small: bool | None = None  # the small pool's (None: decided by size, 2 MiB segments are)


@dataclass
class Failure:
    """Where the model could not serve a request, and the state that failed."""

    index: int  # into the events (-1: the compact start's live blocks did not fit)
    request: int  # bytes asked for
    segment: int  # the new segment it needed
    allocated: int
    reserved: int  # after the cache was freed to retry
    largest_free: int  # the largest free block of the request's pool and stream then
    segments: int = 0  # segments held then


@dataclass
class TraceReplayResult:
    served: bool  # every replayed request was served, the recorded failure (`stop`) included
    failure: Failure | None = None  # the first request not served
    peak_allocated: int = 0
    peak_reserved: int = 0
    retries: int = 0  # num_alloc_retries: the whole cache freed to try a cudaMalloc again
    device_allocs: int = 0
    device_frees: int = 0
    events: int = 0  # how many events were replayed
    unknown_frees: int = 0  # frees of blocks neither the start state nor the trace made

    def as_dict(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


@dataclass
class _State:
    model: CachingAllocatorModel
    live: dict = field(default_factory=dict)  # addr -> Block


def replay_trace(events: Sequence[tuple], *, start: Iterable[StartSegment] = (),
                 settings: AllocatorSettings | None = None, cap: int | None = None,
                 device_limit: int | None = None, stop: int | None = None,
                 total: int = H200_TOTAL, real_addresses: bool = True,
                 compact_start: bool = False) -> TraceReplayResult:
    """Replay `events` [(action, addr, size[, stream])] from `start` until the first request the
    model cannot serve, or until event `stop` (included; None: the end).

    `cap`: what `set_per_process_memory_fraction` allowed (bytes); `device_limit`: what
    cudaMalloc could get at most (PyTorch's reserved + the driver's free memory); `settings`:
    PYTORCH_CUDA_ALLOC_CONF; `total`: the card's memory (sizes expandable segments' ranges).
    `compact_start`: instead of `start`'s own layout (its segments and holes, as the recorded
    settings left them), its live blocks requested afresh under `settings`, in address order,
    with nothing freed between: the tightest layout those settings could have had then."""
    segment_addrs = (e[1] for e in events if e[0] == fmt.SEGMENT_ALLOC)
    addrs = chain(segment_addrs, count(1 << 50, 1 << 44))
    model = CachingAllocatorModel(cap=cap, total=total, device_free=device_limit,
                                  next_address=(lambda: next(addrs)) if real_addresses else None)
    model.apply(settings or AllocatorSettings())
    state = _State(model)
    result = TraceReplayResult(served=True)
    if compact_start:
        live = sorted((a, n, seg.stream) for seg in start for a, n in seg.live)
        for addr, size, stream in live:
            try:
                state.live[addr] = model.malloc(size, stream)
            except AllocatorOutOfMemory as e:  # the live blocks alone do not fit the limit
                result.served = False
                result.failure = Failure(-1, size, e.requested, e.allocated, e.reserved,
                                         _largest_free(model, size, stream), model.stats.segments)
                break
    else:
        for seg in start:
            _seed(state, seg)
    end = len(events) if stop is None else min(stop + 1, len(events))
    if not result.served:  # the compact start did not fit: no event is replayed
        end = 0
    for i in range(end):
        ev = events[i]
        act = ev[0]
        if act == fmt.ALLOC or act == fmt.OOM:
            stream = ev[3] if len(ev) > 3 else 0
            try:
                block = model.malloc(ev[2], stream)
            except AllocatorOutOfMemory as e:
                result.served = False
                result.failure = Failure(i, ev[2], e.requested, e.allocated, e.reserved,
                                         _largest_free(model, ev[2], stream),
                                         model.stats.segments)
                break
            if act == fmt.ALLOC:
                state.live[ev[1]] = block
            else:  # the GPU never handed it out: what followed ran without it
                model.free(block)
        elif act == fmt.FREE:
            block = state.live.pop(ev[1], None)
            if block is None:
                result.unknown_frees += 1
            else:
                model.free(block)
        elif act == fmt.SEGMENT_MAP and not model.expandable_segments:
            model.apply(_with_expandable(settings))  # switched on at run time (lesson 17)
        result.events = i + 1
    s = model.stats
    result.peak_allocated, result.peak_reserved = s.peak_allocated, s.peak_reserved
    result.retries, result.device_allocs, result.device_frees = (
        s.num_alloc_retries, s.num_device_alloc, s.num_device_free)
    return result


def _with_expandable(settings: AllocatorSettings | None) -> AllocatorSettings:
    from dataclasses import replace

    return replace(settings or AllocatorSettings(), expandable_segments=True)


def _seed(state: _State, seg: StartSegment) -> None:
    """Put a segment of the starting state into the model: its live blocks where the GPU had
    them, the space between them free (free neighbours are always merged)."""
    m = state.model
    small = seg.size <= SMALL_BUFFER if seg.small is None else seg.small
    pool = m.small if small else m.large
    end = seg.address + seg.size
    pos, prev, live_bytes = seg.address, None, 0
    pieces: list[tuple[int, int, bool]] = []
    for addr, size in sorted(seg.live):
        if addr < pos or addr + size > end:
            raise NotReplayable(f"a block live at the start ({size:,} B at {addr:#x}) lies "
                                f"outside its segment or overlaps another")
        if addr > pos:
            pieces.append((pos, addr - pos, False))
        pieces.append((addr, size, True))
        pos = addr + size
    if pos < end:
        pieces.append((pos, end - pos, False))
    for addr, size, live in pieces:
        b = Block(addr, size, seg.stream, small)
        b.prev = prev
        if prev is not None:
            prev.next = b
        prev = b
        if live:
            b.allocated, b.requested = True, size
            m.active.add(b)
            state.live[addr] = b
            live_bytes += size
    for b in _chain(prev):
        if not b.allocated:
            pool.add(b)
    m._add_stat("reserved", seg.size)
    m._add_stat("allocated", live_bytes)
    m.stats.segments += 1
    m._segment_addrs.add(seg.address)


def _chain(last: Block | None):
    b = last
    while b is not None:
        yield b
        b = b.prev


def _largest_free(m: CachingAllocatorModel, request: int, stream: int) -> int:
    """The largest cached block the request could have taken: same pool, same stream."""
    pool = m.small if request <= 1 << 20 else m.large
    sizes = [k[1] for k in pool.keys if k[0] == stream and pool.blocks[k].mapped]
    return max(sizes, default=0)


__all__ = ["Failure", "NotReplayable", "StartSegment", "TraceReplayResult", "replay_trace"]
