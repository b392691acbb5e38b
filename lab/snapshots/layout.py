"""The allocator's layout at any entry of a snapshot's trace: its segments and live blocks.

A snapshot holds the final state (`segments`, each with its blocks) and the events that led
there (`device_traces`). Walking the trace backwards from the final state undoes each event (an
`alloc` was not live before it, a `free_completed` was, a `segment_alloc` did not exist before
it, ...), so the layout just after any entry is known exactly, from the recording alone: no
model, no settings, no cap. pytorch.org/memory_viz draws its segment view the same way.

Two uses: the state at an out-of-memory (lab.snapshots.oom: which free block was largest, how
much was reserved but free), and the state *before the first entry* when the ring buffer of
`max_entries` dropped the program's start (lab.snapshots.replay seeds the allocator model with
it).

    lay = layout_at(snapshot, device=0, index=k)     # just after entry k; -1: before the first
    lay.reserved, lay.allocated, lay.largest_free(request, stream), lay.holes

Block sizes from the trace are what was asked (an `alloc`'s `size`); the allocator hands out
blocks rounded up to 512 B, so the layout rounds them too. Expandable segments are tracked as
their mapped ranges (what `segment_map` / `segment_unmap` name).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from lab.measure.snapshot_format import (ACTIVE_STATES, ALLOC, FREE, SEGMENT_ALLOC, SEGMENT_FREE,
                                         SEGMENT_MAP, SEGMENT_UNMAP)

MIN_BLOCK = 512
SMALL_REQUEST = 1 << 20  # requests up to 1 MiB come from the small pool
SMALL_SEGMENT = 2 << 20  # and its segments are 2 MiB
DEFAULT_POOL = (0, 0)


def _rounded(n: int) -> int:
    return -(-max(int(n), 1) // MIN_BLOCK) * MIN_BLOCK


@dataclass
class Segment:
    address: int
    size: int
    stream: int = 0
    expandable: bool = False
    small: bool = False
    pool: tuple = DEFAULT_POOL  # segment_pool_id: (0, 0) the default pools, else a private one


@dataclass
class Layout:
    segments: dict[int, Segment] = field(default_factory=dict)  # address -> segment
    live: dict[int, tuple[int, int]] = field(default_factory=dict)  # address -> (size, stream)
    problems: list[str] = field(default_factory=list)  # what did not add up

    @property
    def reserved(self) -> int:
        return sum(s.size for s in self.segments.values())

    @property
    def allocated(self) -> int:
        return sum(_rounded(n) for n, _ in self.live.values())

    def blocks_by_segment(self) -> dict[int, list[tuple[int, int]]]:
        """segment address -> [(address, size)] of its live blocks, by address."""
        starts = sorted(self.segments)
        out: dict[int, list[tuple[int, int]]] = {a: [] for a in starts}
        for addr, (size, _) in sorted(self.live.items()):
            k = bisect.bisect_right(starts, addr) - 1
            if k < 0 or addr >= starts[k] + self.segments[starts[k]].size:
                self.problems.append(f"a live block at {addr:#x} lies in no segment")
                continue
            out[starts[k]].append((addr, _rounded(size)))
        return out

    def free_blocks(self) -> list[tuple[int, Segment, bool]]:
        """(size, segment, in a segment that holds a live block) of every free range."""
        out = []
        for start, blocks in self.blocks_by_segment().items():
            seg = self.segments[start]
            pos, end = start, start + seg.size
            for addr, size in blocks:
                if addr > pos:
                    out.append((addr - pos, seg, True))
                pos = max(pos, addr + size)
            if pos < end:
                out.append((end - pos, seg, bool(blocks)))
        return out

    def largest_free(self, request: int, stream: int = 0) -> int:
        """The largest free block a request of `request` bytes on `stream` could take: the same
        pool (small up to 1 MiB), the same stream, the default pools."""
        small = request <= SMALL_REQUEST
        return max((n for n, seg, _ in self.free_blocks()
                    if seg.small == small and seg.stream == stream and seg.pool == DEFAULT_POOL),
                   default=0)

    @property
    def holes(self) -> int:
        """Free bytes in cudaMalloc'd segments that also hold a live block: reserved memory that
        neither a larger request nor empty_cache() can use (inactive_split_bytes)."""
        return sum(n for n, seg, shared in self.free_blocks() if shared and not seg.expandable)

    @property
    def private_pools(self) -> set[tuple]:
        return {s.pool for s in self.segments.values() if s.pool != DEFAULT_POOL}


def final_layout(snapshot: dict, device: int) -> Layout:
    """The state when the snapshot was taken (its `segments`)."""
    lay = Layout()
    for seg in snapshot.get("segments") or ():
        if not isinstance(seg, dict) or seg.get("device", 0) != device:
            continue
        addr, stream = int(seg.get("address", 0) or 0), int(seg.get("stream", 0) or 0)
        pool = seg.get("segment_pool_id") or DEFAULT_POOL
        s = Segment(addr, int(seg.get("total_size", 0) or 0), stream,
                    bool(seg.get("is_expandable")), seg.get("segment_type") == "small",
                    tuple(pool) if isinstance(pool, (list, tuple)) else DEFAULT_POOL)
        _add_range(lay, s) if s.expandable else lay.segments.__setitem__(addr, s)
        pos = addr
        for b in seg.get("blocks") or ():
            size = int(b.get("size", 0) or 0)
            at = int(b.get("address", pos) or pos)
            if b.get("state") in ACTIVE_STATES:
                lay.live[at] = (size, stream)
            pos = at + size
    return lay


def layout_at(snapshot: dict, device: int, index: int, entries: list | None = None) -> Layout:
    """The layout just after trace entry `index` (-1: before the first entry), rebuilt backwards
    from the final state."""
    if entries is None:
        traces = snapshot.get("device_traces") or []
        entries = traces[device] if device < len(traces) and traces[device] else []
    lay = final_layout(snapshot, device)
    small_segments = {a for a, s in lay.segments.items() if s.small}
    for j in range(len(entries) - 1, index, -1):
        e = entries[j]
        act = e.get("action")
        if act == ALLOC:
            if lay.live.pop(e.get("addr"), None) is None:
                lay.problems.append(f"entry {j}: an alloc the final state does not hold")
        elif act == FREE:
            lay.live[e.get("addr")] = (int(e.get("size", 0) or 0), int(e.get("stream", 0) or 0))
        elif act == SEGMENT_ALLOC:
            if lay.segments.pop(e.get("addr"), None) is None:
                lay.problems.append(f"entry {j}: a segment the final state does not hold")
        elif act == SEGMENT_FREE:
            addr, size = e.get("addr"), int(e.get("size", 0) or 0)
            pool = e.get("pool_id") or DEFAULT_POOL
            lay.segments[addr] = Segment(addr, size, int(e.get("stream", 0) or 0), False,
                                         size == SMALL_SEGMENT or addr in small_segments,
                                         tuple(pool) if isinstance(pool, (list, tuple))
                                         else DEFAULT_POOL)
        elif act == SEGMENT_MAP:  # mapped at j: not mapped before
            _remove_range(lay, int(e.get("addr", 0)), int(e.get("size", 0) or 0))
        elif act == SEGMENT_UNMAP:  # unmapped at j: mapped before
            size = int(e.get("size", 0) or 0)
            _add_range(lay, Segment(int(e.get("addr", 0)), size, int(e.get("stream", 0) or 0),
                                    True, False))
    return lay


# ---- expandable segments: mapped ranges ---------------------------------------------------------
def _add_range(lay: Layout, s: Segment) -> None:
    """Map [address, address + size): merge with mapped neighbours of the same stream."""
    segs = lay.segments
    for addr, other in list(segs.items()):
        if not other.expandable or other.stream != s.stream:
            continue
        if other.address + other.size == s.address:
            del segs[addr]
            s = Segment(other.address, other.size + s.size, s.stream, True, other.small, s.pool)
        elif s.address + s.size == other.address:
            del segs[addr]
            s = Segment(s.address, s.size + other.size, s.stream, True, s.small, s.pool)
    segs[s.address] = s


def _remove_range(lay: Layout, addr: int, size: int) -> None:
    end = addr + size
    for start, s in list(lay.segments.items()):
        if not s.expandable or not (s.address <= addr and end <= s.address + s.size):
            continue
        del lay.segments[start]
        if s.address < addr:
            lay.segments[s.address] = Segment(s.address, addr - s.address, s.stream, True,
                                              s.small, s.pool)
        if end < s.address + s.size:
            lay.segments[end] = Segment(end, s.address + s.size - end, s.stream, True,
                                        s.small, s.pool)
        return
    lay.problems.append(f"an expandable range at {addr:#x} the final state does not map")


__all__ = ["DEFAULT_POOL", "Layout", "Segment", "final_layout", "layout_at"]
