"""A model of PyTorch's CUDA caching allocator: where a run's bytes land in segments.

Written from the rules of c10/cuda/CUDACachingAllocator.cpp (torch 2.11; the rules below have not
changed in 2.x), not copied from it:

- every request is rounded up to 512 B; requests of at most 1 MiB come from the *small* pool,
  larger ones from the *large* pool (`round_size`, `get_pool`);
- a cache miss reserves a new segment (cudaMalloc): 2 MiB for a small request, 20 MiB for a
  large one under 10 MiB, else the request rounded up to 2 MiB (`get_allocation_size`);
- a free block is found best-fit: the smallest cached block of the same stream that is large
  enough, ties broken by address (`get_free_block`, the pool ordered by (stream, size, addr));
- a found block is split when the rest is worth keeping: >= 512 B in the small pool (and in
  expandable segments), > 1 MiB in the large pool; otherwise the whole block is handed out and
  counts as allocated (`should_split`) - this is where `max_memory_allocated` grows beyond the
  tensors' bytes;
- freed blocks merge with free neighbours of the same segment and stay cached (reserved);
- before an out-of-memory error the allocator frees every cached segment that holds no live
  block and tries once more (`release_cached_blocks`, counted in `num_alloc_retries`);
- `set_per_process_memory_fraction` caps what may be reserved: a new segment fails when
  reserved + its size would exceed the cap (`alloc_block`);
- `expandable_segments:True`: one growing segment per pool and stream, mapped in pages of
  2 MiB (small) / 20 MiB (large); freeing maps nothing back until memory runs short or
  `empty_cache()` unmaps the whole free pages (lab.measure.sim.allocator.expandable);
- `max_split_size_mb`, `max_non_split_rounding_mb`, `roundup_power2_divisions` (how requests
  are rounded, which cached blocks a request may take, which are split) and
  `garbage_collection_threshold` (what is freed before a new segment): the settings are parsed
  in lab.measure.sim.allocator.settings, the freeing in lab.measure.sim.allocator.release, the
  counters and segments `torch.cuda.memory_stats()` / `memory_snapshot()` report in
  lab.measure.sim.allocator.view.

Validated on real H200 allocator traces (bench/sim_allocator_traces.py): given the GPU's segment
addresses, the model's max allocated / max reserved / OOM / retries equal the GPU's to the byte;
without them (sim), new segments take descending addresses, as cudaMalloc mostly gives them.

Streams (lab.measure.sim.allocator.streams): each stream keeps its own blocks; a block used on
another stream (`record_stream`) and freed waits for that stream's events before it is cached
again; an event completes at the next synchronisation point of its stream (the model's rule:
the host is taken to be ahead of the GPU). The stream API: `malloc(nbytes, stream)`,
`free(block)`, `record_stream(block, stream)`, `event()`, `synchronize(stream | None)`.

Not modelled: CUDA graph pools and memory pools (`torch.cuda.MemPool`), free-memory callbacks,
`backend:cudaMallocAsync`: no lesson uses them.
"""

from __future__ import annotations

import bisect
from bisect import bisect_left, insort
from dataclasses import dataclass, field
from itertools import count

from ...counters import AllocatorCounters
from .expandable import ExpandableSegments
from .release import ReleaseRules
from .settings import (LARGE_BUFFER as _LARGE_BUFFER, UNLIMITED, AllocatorSettings,
                                 divisions_for, next_division)
from .streams import StreamUses

MIN_BLOCK = 512  # kMinBlockSize
SMALL_SIZE = 1 << 20  # kSmallSize: the largest small request
SMALL_BUFFER = 2 << 20  # kSmallBuffer: small segments
LARGE_BUFFER = 20 << 20  # kLargeBuffer: segments for large requests under 10 MiB; expandable page
MIN_LARGE_ALLOC = 10 << 20  # kMinLargeAlloc
ROUND_LARGE = 2 << 20  # kRoundLarge
H200_TOTAL = 150_109_880_320  # torch.cuda.get_device_properties(0).total_memory on the H200


def round_size(n: int, divisions: tuple[int, ...] = ()) -> int:
    """512 B at least; with `roundup_power2_divisions`, the next division of the request's
    power-of-two interval (when that interval's divisions are > 1 and n > 512 B x divisions)."""
    if n < MIN_BLOCK:
        return MIN_BLOCK
    d = divisions_for(n, divisions) if divisions else 0
    if d > 1 and n > MIN_BLOCK * d:
        return next_division(n, d)
    return -(-n // MIN_BLOCK) * MIN_BLOCK


def allocation_size(size: int) -> int:
    """The segment a cache miss of `size` (already rounded) reserves."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class AllocatorOutOfMemory(Exception):
    """The model's `torch.OutOfMemoryError`: `requested` (the segment asked for), the counters."""

    def __init__(self, requested: int, allocated: int, reserved: int, cap: int | None):
        self.requested, self.allocated, self.reserved, self.cap = requested, allocated, reserved, cap
        super().__init__(f"out of memory: a segment of {requested:,} B on top of {reserved:,} B "
                         f"reserved ({allocated:,} B allocated), cap {cap}")


class Block:
    __slots__ = ("addr", "size", "stream", "small", "allocated", "prev", "next", "seg", "mapped",
                 "gc_base", "requested", "uses", "events")

    def __init__(self, addr, size, stream, small, seg=None, mapped=True):
        self.addr, self.size, self.stream, self.small = addr, size, stream, small
        self.allocated, self.prev, self.next = False, None, None
        self.seg, self.mapped = seg, mapped  # seg: the ExpandableSegment, None for cudaMalloc ones
        self.gc_base = 0  # the pool's free-block searches when this block was cached (GC's age)
        self.requested = 0  # bytes asked for (what a snapshot's requested_size says)
        self.uses = None  # other streams that used it (record_stream), None when none
        self.events = 0  # events it waits for after its free (lab.measure.sim.allocator.streams)

    def key(self):
        return (self.stream, self.size, self.addr)

    @property
    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None


class _Pool:
    """Free blocks of one pool ordered by (stream, size, address), as the allocator's std::set."""

    def __init__(self, small: bool):
        self.small = small
        self.keys: list[tuple] = []
        self.blocks: dict[tuple, Block] = {}
        self.unmapped: list[tuple] = []  # (stream, addr) of unmapped expandable ranges
        self.unmapped_blocks: dict[tuple, Block] = {}
        self.free_calls = 0  # get_free_blocks_call_count: counts only while GC is on

    # add / remove run a few times per allocation: Block.key() written out (no method call)
    def add(self, b: Block) -> None:
        b.gc_base = self.free_calls  # insert_into_blocks
        k = (b.stream, b.size, b.addr)
        insort(self.keys, k)
        self.blocks[k] = b

    def remove(self, b: Block) -> None:
        k = (b.stream, b.size, b.addr)
        keys = self.keys
        del keys[bisect_left(keys, k)]
        del self.blocks[k]

    def add_unmapped(self, b: Block) -> None:
        k = (b.stream, b.addr)
        bisect.insort(self.unmapped, k)
        self.unmapped_blocks[k] = b

    def remove_unmapped(self, b: Block) -> None:
        k = (b.stream, b.addr)
        del self.unmapped[bisect.bisect_left(self.unmapped, k)]
        del self.unmapped_blocks[k]


@dataclass
class Stats(AllocatorCounters):
    """The allocator's counters (lab.measure.counters), and the model's own counts."""

    segments: int = 0
    num_device_alloc: int = 0  # cudaMalloc calls and expandable maps
    num_device_free: int = 0  # cudaFree calls and expandable unmaps


@dataclass
class CachingAllocatorModel(ExpandableSegments, ReleaseRules, StreamUses):
    """One device's allocator. `cap`: bytes `set_per_process_memory_fraction` allows (None: no
    cap); `device_free`: what cudaMalloc can still get (None: unlimited); `total`: the GPU's
    memory (sizes the virtual range of expandable segments). The PYTORCH_CUDA_ALLOC_CONF
    settings are fields (`apply(settings)` sets them all)."""

    cap: int | None = None
    expandable_segments: bool = False
    max_split_size: int = UNLIMITED  # max_split_size_mb, in bytes
    max_non_split_rounding: int = _LARGE_BUFFER  # max_non_split_rounding_mb, in bytes
    roundup_power2_divisions: tuple[int, ...] = ()  # () or 16 intervals' divisions
    gc_threshold: float = 0.0  # garbage_collection_threshold
    device_free: int | None = None
    total: int = H200_TOTAL
    stats: Stats = field(default_factory=Stats)
    # where each new segment starts. Best fit breaks ties between equal free blocks by address,
    # and cudaMalloc's addresses are not predictable: by default they grow (synthetic); replaying
    # a real trace, pass the recorded segment addresses to reproduce it to the byte
    next_address: object = None

    Block = Block  # for the expandable-segments mixin (lab.measure.sim.allocator.expandable)
    SMALL_PAGE, LARGE_PAGE = SMALL_BUFFER, LARGE_BUFFER
    UNLIMITED = UNLIMITED

    def __post_init__(self):
        self.small, self.large = _Pool(True), _Pool(False)
        self.active: set[Block] = set()  # handed-out blocks (for snapshots)
        # Without the GPU's own addresses: each new segment below the last one. Best fit breaks
        # ties between equal free blocks by address, so where cudaMalloc puts segments decides
        # which block is reused; on the H200 it mostly hands out descending addresses (96 of
        # 136 segments in lesson 16's trace). Replaying ten H200 traces with synthetic addresses
        # (tests/unit/test_allocator_hf_traces.py), descending ones give the GPU's max reserved
        # on all ten, ascending ones miss four by up to 5.5 %. 1 TiB apart: no segment overlaps.
        self._addr = self.next_address or count(1 << 62, -(1 << 40)).__next__
        # cudaMalloc'd segments held now, by address. A replayed trace's addresses repeat (the
        # GPU reuses a freed segment's): under other settings the model may still hold that
        # segment when the trace hands its address out again, and two free blocks of one key
        # would corrupt the pool, so such an address is skipped
        self._segment_addrs: set[int] = set()
        self._init_streams()

    # ---- public --------------------------------------------------------------------------
    def apply(self, settings: AllocatorSettings) -> None:
        """PYTORCH_CUDA_ALLOC_CONF (parsed): what the next requests follow."""
        self.expandable_segments = settings.expandable_segments
        self.max_split_size = settings.max_split_size
        self.max_non_split_rounding = settings.max_non_split_rounding
        self.roundup_power2_divisions = (settings.roundup_power2_divisions
                                         if any(settings.roundup_power2_divisions) else ())
        self.gc_threshold = settings.garbage_collection_threshold

    def bounded(self, nbytes: int) -> int:
        """`nbytes`, at most what `CUDACachingAllocator::cacheInfo` answers: the larger of the
        device's free memory (cudaMemGetInfo; the context's own memory aside) and the largest
        cached free block, which is only looked for when the free memory is short. A `cap`
        stands for a smaller card here (`memlab fit`, --gpu-memory), so it bounds the free
        memory too (a real set_per_process_memory_fraction would not: the request would fail
        and be halved, which `Replay` does as well)."""
        limits = [self.total] + [n for n in (self.device_free, self.cap) if n is not None]
        free = max(0, min(limits) - self.stats.reserved)
        if nbytes <= free:
            return nbytes
        cached = max((k[1] for pool in (self.large, self.small) for k in pool.keys), default=0)
        return min(nbytes, max(free, cached))

    @property
    def gc_on(self) -> bool:
        """Garbage collection needs a memory fraction (`cap`) as well as a threshold."""
        return self.cap is not None and self.gc_threshold > 0

    def malloc(self, nbytes: int, stream: int = 0) -> Block:
        if self._events:
            self.process_events()  # blocks whose streams' events completed come back first
        size = round_size(nbytes, self.roundup_power2_divisions)
        pool = self.small if size <= SMALL_SIZE else self.large
        block = self._get_free_block(pool, size, stream)
        if block is None:
            alloc = allocation_size(size)
            if self.gc_on:
                self._garbage_collect()
            block = self._alloc_block(pool, size, alloc, stream)
            if block is None and self._release_available(pool, size, stream):
                block = self._alloc_block(pool, size, alloc, stream)  # after oversize blocks went
            if block is None:
                self.release_cached()  # free every whole cached segment, then try once more
                self.stats.num_alloc_retries += 1
                block = self._alloc_block(pool, size, alloc, stream)
            if block is None:
                self.stats.num_ooms += 1
                raise AllocatorOutOfMemory(alloc, self.stats.allocated, self.stats.reserved, self.cap)
        block = self._hand_out(pool, block, size)
        block.requested = nbytes
        if self.pending_bytes:
            self.peak_active = max(self.peak_active, self.active_bytes)
        return block

    def free(self, block: Block) -> None:
        """`memory_allocated()` drops now; the block is cached now, or, used on other streams
        (record_stream), once their events complete (lab.measure.sim.allocator.streams)."""
        block.allocated = False
        self.stats.allocated -= block.size  # a drop sets no peak (`_add_stat` without it)
        if block.uses:
            self._insert_events(block)
        else:
            self._free_block(block)

    def _free_block(self, block: Block) -> None:
        """The block back into its pool, merged with its free neighbours (`free_block`)."""
        self.active.discard(block)
        pool = self.small if block.small else self.large
        for other in (block.prev, block.next):
            self._merge(block, other, pool)
        pool.add(block)

    def release_cached(self) -> None:
        """`torch.cuda.empty_cache()`: wait for every stream's events (their blocks come back),
        then give back every segment (page) that holds no live block."""
        self._sync_and_free_events()
        for pool in (self.large, self.small):
            to_unmap = []
            for k in list(pool.keys):
                b = pool.blocks[k]
                if b.seg is not None:
                    to_unmap.append(b)
                elif not b.is_split:
                    self._release_segment(pool, b)
            for b in to_unmap:
                self._unmap(pool, b)

    def _release_segment(self, pool: _Pool, b: Block) -> None:
        """cudaFree of a whole cached segment (`release_block`)."""
        pool.remove(b)
        self._segment_addrs.discard(b.addr)
        self._add_stat("reserved", -b.size)
        self.stats.segments -= 1
        self.stats.num_device_free += 1

    # ---- finding and splitting -------------------------------------------------------------
    def _get_free_block(self, pool: _Pool, size: int, stream: int) -> Block | None:
        if self.gc_on:
            pool.free_calls += 1  # blocks age by free-block searches (GC's clock)
        i = bisect.bisect_left(pool.keys, (stream, size, 0))
        keys = pool.keys
        if i == len(keys) or keys[i][0] != stream:
            return None
        b = pool.blocks[keys[i]]
        if b.seg is not None:
            if self.expandable_segments:
                # a block that can grow into unmapped pages is as large as it can grow; prefer a
                # block that fits without growing
                def grow(x: Block) -> int:
                    return x.size + (x.next.size if x.next is not None and not x.next.mapped else 0)

                j = i + 1
                while (b.seg is not None and j < len(keys) and keys[j][0] == stream
                       and grow(pool.blocks[keys[j]]) < grow(b)):
                    i, b, j = j, pool.blocks[keys[j]], j + 1
            else:  # expandable segments switched off later: only cudaMalloc'd blocks
                while b.seg is not None:
                    i += 1
                    if i == len(keys) or keys[i][0] != stream:
                        return None
                    b = pool.blocks[keys[i]]
        limit = self.max_split_size
        if size < limit <= b.size:
            return None  # an oversize block is not cut for a smaller request
        if size >= limit and b.size >= size + self.max_non_split_rounding:
            return None  # nor handed whole to a request it exceeds by the rounding limit or more
        pool.remove(b)
        return b

    def _hand_out(self, pool: _Pool, block: Block, size: int) -> Block:
        rest = block.size - size
        if pool.small or self.expandable_segments:  # should_split
            split = rest >= MIN_BLOCK
        else:
            split = size < self.max_split_size and rest > SMALL_SIZE
        if split:
            remaining = Block(block.addr + size, rest, block.stream, block.small, block.seg)
            remaining.prev, remaining.next = block, block.next
            if block.next is not None:
                block.next.prev = remaining
            block.next, block.size = remaining, size
            pool.add(remaining)
        block.allocated = True
        self.active.add(block)
        s = self.stats  # `_add_stat("allocated", ...)` written out: once per allocation
        s.allocated = v = s.allocated + block.size
        if v > s.peak_allocated:
            s.peak_allocated = v
        return block

    def _merge(self, dst: Block, src: Block | None, pool: _Pool) -> None:
        if src is None or src.allocated or src.events or src.mapped != dst.mapped:
            return  # a block that waits for other streams' events is not merged either
        if src.mapped:
            pool.remove(src)
        else:
            pool.remove_unmapped(src)
        if dst.prev is src:
            dst.addr, dst.prev = src.addr, src.prev
            if src.prev is not None:
                src.prev.next = dst
        else:
            dst.next = src.next
            if src.next is not None:
                src.next.prev = dst
        dst.size += src.size

    # ---- new memory ------------------------------------------------------------------------
    def _alloc_block(self, pool: _Pool, size: int, alloc: int, stream: int) -> Block | None:
        if self.cap is not None and self.stats.reserved + alloc > self.cap:
            return None
        if self.expandable_segments:
            return self._expandable_block(pool, size, stream)
        if self.device_free is not None and self.stats.reserved + alloc > self.device_free:
            return None
        self._add_stat("reserved", alloc)
        self.stats.segments += 1
        self.stats.num_device_alloc += 1
        addr = self._addr()
        while addr in self._segment_addrs:
            addr = self._addr()
        self._segment_addrs.add(addr)
        return Block(addr, alloc, stream, pool.small)

    def _add_stat(self, name: str, n: int) -> None:
        s = self.stats
        v = getattr(s, name) + n
        setattr(s, name, v)
        peak = "peak_" + name
        if v > getattr(s, peak):
            setattr(s, peak, v)
