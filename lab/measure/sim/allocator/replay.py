"""Replay a run's allocations through the caching-allocator model.

`Replay` is the online form (sim feeds it every storage as it is born and freed, so an
out-of-memory is raised at the allocation that would fail on the GPU); `replay()` the offline
form for a finished sequence (`memlab fit`, tests, the bench against real allocator traces):

    result = replay(events, cap=16 * 2**30)   # events: ("alloc", key, nbytes) | ("free", key)
    result.oom, result.peak_allocated, result.peak_reserved

An allocation made on another CUDA stream than the default one is ("alloc", key, nbytes,
stream): the caching allocator keeps the blocks of each stream apart (a freed block is reused
only by its own stream), which is why FSDP2's all-gather and reduce-scatter streams reserve more
than the same bytes on one stream would.

Streams (lab.measure.sim.allocator.streams): ("record_stream", key, stream) - the allocation was
used on `stream` (Tensor.record_stream); ("synchronize", stream, upto) - that stream's events
recorded before mark `upto` completed (stream None: every stream; upto None: all so far).

Other events: ("empty_cache",), ("expandable", True|False) (allocator settings changed at run
time, as lesson 17 does) and ("settings", "max_split_size_mb:256,...") (any PYTORCH_CUDA_ALLOC_CONF
string given at run time; lab.measure.sim.allocator.settings says what it resets).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

import torch

from ... import snapshot_format as fmt
from ...counters import KEYS, AllocatorCounters

from dataclasses import replace

from .model import H200_TOTAL, AllocatorOutOfMemory, CachingAllocatorModel, round_size
from .settings import AllocatorSettings, parse_alloc_conf


class SimulatedOutOfMemory(torch.OutOfMemoryError):
    """Raised where the modelled allocator fails; worded as the CUDA caching allocator words it."""


@dataclass(frozen=True)
class Bounded:
    """The key of a request the device's free memory bounds instead of failing: cuDNN's
    benchmark search (Conv_v8.cpp `generate_and_filter_plans`) drops the candidate plans whose
    workspace exceeds the largest block it could get (`cacheInfo`: the device's free memory or
    the largest cached block), allocates the largest of the rest, and halves that while the
    allocation fails; and a plan whose own workspace cannot be had is passed over for the next
    (`try_plans`, `try_configs`). Sim knows the largest candidate's size, not the list: it takes
    that size bounded by the same largest block, halved while it fails; none at all is no
    error."""

    name: Hashable


def _size(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.2f} MiB"


def oom_message(e: AllocatorOutOfMemory, total: int) -> str:
    allowed = f"{_size(e.cap)} allowed; " if e.cap is not None else ""
    return (f"CUDA out of memory. Tried to allocate {_size(e.requested)}. GPU 0 has a total capacity "
            f"of {_size(total)} of which {_size(total - e.reserved)} is free. {allowed}Of the "
            f"allocated memory {_size(e.allocated)} is allocated by PyTorch, and "
            f"{_size(e.reserved - e.allocated)} is reserved by PyTorch but unallocated. (simulated: "
            f"predicted by memlab's model of the caching allocator)")


@dataclass
class OomPoint:
    index: int  # which event failed
    requested: int  # the segment the allocator asked for (what PyTorch's message names)
    allocated: int
    reserved: int
    request: int = 0  # the bytes the program asked for (a memory snapshot's `oom` entry: rounded)
    stream: int = 0


@dataclass
class ReplayResult(AllocatorCounters):
    """The counters at the end of the replay (allocated / reserved: at the end; the peaks), where
    it ran out of memory, and the allocated / reserved series."""

    oom: OomPoint | None = None
    # (event index, bytes) after every change, for timelines
    allocated_series: list[tuple[int, int]] = field(default_factory=list)
    reserved_series: list[tuple[int, int]] = field(default_factory=list)


class Replay:
    """The allocator model fed one event at a time; keys name live allocations."""

    def __init__(self, cap: int | None = None, expandable: bool = False, total: int = H200_TOTAL,
                 series: bool = False, device_free: int | None = None, next_address=None,
                 record: bool = False, settings: AllocatorSettings | None = None):
        self.model = CachingAllocatorModel(cap=cap, total=total, device_free=device_free,
                                           next_address=next_address)
        self.settings = settings or AllocatorSettings(expandable_segments=expandable)
        self.model.apply(self.settings)
        self.live: dict[Hashable, object] = {}
        self.series = series
        self.index = 0
        self.clock = None  # x of the series: a callable (e.g. the tracker's event count), else a count
        # record=True: every event received, in order, as `replay()` takes them - run sim once
        # without a cap, then ask `replay(log, cap=...)` about any cap (what `memlab fit` needs)
        self.log: list[tuple] | None = [] if record else None
        self.result = ReplayResult()
        # the stream the next allocation is made on (0: the default one); sim sets a callable
        # that reads the stream the code selected (lab.measure.sim.dispatch.policy)
        self.current_stream = None
        self._aliases: dict[Hashable, list[Hashable]] = {}  # relayout(): old key -> new keys
        # a PYTORCH_CUDA_ALLOC_CONF the allocator refuses: raised at the first allocation
        self.refused: Exception | None = None

    def alloc(self, key: Hashable, nbytes: int, stream: int | None = None) -> int | None:
        """Raises `SimulatedOutOfMemory` where the GPU would raise torch.OutOfMemoryError. A
        `Bounded` request returns the bytes it got (None otherwise: all it asked for)."""
        if self.refused is not None:
            raise self.refused
        if stream is None:
            stream = self.current_stream() if self.current_stream is not None else 0
        if self.log is not None:
            self.log.append(("alloc", key, nbytes, stream) if stream else ("alloc", key, nbytes))
        try:
            if isinstance(key, Bounded):
                return self._malloc_bounded(key, nbytes, stream)
            self.live[key] = self.model.malloc(nbytes, stream)
        except AllocatorOutOfMemory as e:
            self.result.oom = OomPoint(self.index, e.requested, e.allocated, e.reserved,
                                       round_size(nbytes, self.model.roundup_power2_divisions),
                                       stream)
            raise SimulatedOutOfMemory(oom_message(e, self.model.total)) from None
        finally:
            if self.series:  # `_step()` written out: once per event
                self._add_to_series()
            self.index += 1

    def _malloc_bounded(self, key: Bounded, nbytes: int, stream: int) -> int:
        size = self.model.bounded(nbytes)
        while size:
            try:
                self.live[key] = self.model.malloc(size, stream)
                return size
            except AllocatorOutOfMemory:
                size //= 2
        return 0

    def free(self, key: Hashable) -> None:
        if self._aliases and key in self._aliases:  # remade by relayout(): its successors go
            for successor in self._aliases.pop(key):
                self.free(successor)
            return
        if self.log is not None:
            self.log.append(("free", key))
        block = self.live.pop(key, None)
        if block is not None:
            self.model.free(block)
        if self.series:
            self._add_to_series()
        self.index += 1

    def record_stream(self, key: Hashable, stream: int) -> None:
        """The live allocation `key` was used on `stream` (Tensor.record_stream): freed, its
        block waits for that stream's events (lab.measure.sim.allocator.streams)."""
        block = self.live.get(key)
        if block is None:
            return
        if self.log is not None:
            self.log.append(("record_stream", key, stream))
        self.model.record_stream(block, stream)

    def event(self) -> int:
        """A mark for "an event recorded now" (`synchronize(stream, upto=mark)`)."""
        return self.model.event()

    def synchronize(self, stream: int | None = None, upto: int | None = None) -> None:
        """A synchronisation point of `stream` (None: every stream): its events recorded before
        `upto` (None: so far) complete; their blocks come back at the next allocation."""
        if not self.model.waiting:
            return  # nothing waits: a no-op (and no log line for every phase's synchronize)
        upto = self.model.event() if upto is None else upto
        if self.log is not None:
            self.log.append(("synchronize", stream, upto))
        self.model.synchronize(stream, upto)

    def relayout(self, old: list[Hashable], sizes: list[int]) -> None:
        """The live allocations `old` are remade as allocations of `sizes` (the same bytes in
        another layout: DDP rebuilding its gradient buckets in C++, which sim cannot run): `old`
        are freed, the new ones allocated in order; freeing any key of `old` later frees them."""
        for key in old:
            self.free(key)
        new = [("relayout", self.index, i) for i in range(len(sizes))]
        for key, nbytes in zip(new, sizes):
            self.alloc(key, nbytes)
        if old:
            self._aliases[old[0]] = new

    def empty_cache(self) -> None:
        if self.log is not None:
            self.log.append(("empty_cache",))
        self.model.release_cached()
        self._step()

    def set_expandable(self, on: bool) -> None:
        if self.log is not None:
            self.log.append(("expandable", on))
        self.settings = replace(self.settings, expandable_segments=bool(on))
        self.model.apply(self.settings)

    def set_settings(self, conf: str) -> None:
        """A PYTORCH_CUDA_ALLOC_CONF string at run time (`_set_allocator_settings`); raises
        AllocatorSettingsError (one line) where the allocator would refuse it."""
        self.settings = parse_alloc_conf(conf, self.settings)
        if self.log is not None:
            self.log.append(("settings", conf))
        self.model.apply(self.settings)

    def _step(self) -> None:
        if self.series:
            self._add_to_series()
        self.index += 1

    def _add_to_series(self) -> None:
        s, r = self.model.stats, self.result
        x = self.clock() if self.clock is not None else self.index
        if not r.allocated_series or r.allocated_series[-1][1] != s.allocated:
            r.allocated_series.append((x, s.allocated))
        if not r.reserved_series or r.reserved_series[-1][1] != s.reserved:
            r.reserved_series.append((x, s.reserved))

    def finish(self) -> ReplayResult:
        s, r = self.model.stats, self.result
        for name in KEYS:  # the counters, as the model has them now
            setattr(r, name, getattr(s, name))
        return r


def replay(events: Iterable[tuple], *, cap: int | None = None, expandable: bool = False,
           total: int = H200_TOTAL, series: bool = False, device_free: int | None = None,
           settings: AllocatorSettings | None = None) -> ReplayResult:
    """Run `events` until the end or the first out-of-memory (then `result.oom` says where).
    `cap`: what set_per_process_memory_fraction allows; `device_free`: what cudaMalloc can get;
    `settings`: PYTORCH_CUDA_ALLOC_CONF at the start (lab.measure.sim.allocator.settings)."""
    r = Replay(cap=cap, expandable=expandable, total=total, series=series, device_free=device_free,
               settings=settings)
    for ev in events:
        kind = ev[0]
        try:
            if kind == "alloc":
                r.alloc(ev[1], ev[2], ev[3] if len(ev) > 3 else 0)
            elif kind == "free":
                r.free(ev[1])
            elif kind == "record_stream":
                r.record_stream(ev[1], ev[2])
            elif kind == "synchronize":
                r.synchronize(ev[1], ev[2])
            elif kind == "empty_cache":
                r.empty_cache()
            elif kind == "expandable":
                r.set_expandable(bool(ev[1]))
            elif kind == "settings":
                r.set_settings(str(ev[1]))
            else:
                raise ValueError(f"unknown allocator event {ev!r}")
        except SimulatedOutOfMemory:
            break
    return r.finish()


def replay_cuda_trace(events: Iterable[tuple], *, cap: int | None = None,
                      real_addresses: bool = True, settings: AllocatorSettings | None = None) -> dict:
    """Replay the caching allocator's own trace (`torch.cuda.memory._snapshot()["device_traces"]`
    as (action, addr, size)) through the model: {"allocated", "reserved", "oom", "retries"}, to
    compare with what the GPU said. `real_addresses`: new segments take the GPU's addresses, in
    order (best fit breaks ties by address), then (expandable segments are mapped, not
    cudaMalloc'd) synthetic ones. `settings`: the run's PYTORCH_CUDA_ALLOC_CONF."""
    from itertools import chain, count

    events = list(events)
    addrs = chain((addr for act, addr, _ in events if act == fmt.SEGMENT_ALLOC),
                  count(1 << 50, 1 << 44))
    r = Replay(cap=cap, next_address=(lambda: next(addrs)) if real_addresses else None,
               settings=settings)
    oom = False
    for act, addr, size in events:
        try:
            if act == fmt.ALLOC:
                r.alloc(addr, size)
            elif act == fmt.FREE:
                r.free(addr)
            elif act == fmt.SEGMENT_MAP and not r.model.expandable_segments:
                r.set_expandable(True)  # switched on at run time (lesson 17)
            elif act == fmt.OOM:  # the request that failed on the GPU
                r.alloc("oom", size)
        except SimulatedOutOfMemory:
            oom = True
    res = r.finish()
    return {"allocated": res.peak_allocated, "reserved": res.peak_reserved, "oom": oom,
            "retries": res.num_alloc_retries, "segments_freed": r.model.stats.num_device_free}
