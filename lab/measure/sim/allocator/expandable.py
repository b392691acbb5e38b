"""Expandable segments (`expandable_segments:True`) for lab.measure.sim.allocator.model's model.

One growing segment per pool and stream, a virtual range of 1 1/8 of the GPU's memory mapped in
pages of 2 MiB (small pool) / 20 MiB (large pool) as it is needed; freed memory stays mapped (and
reserved) until memory runs short or `empty_cache()` unmaps the whole free pages. Modelled on
c10/cuda/CUDACachingAllocator.cpp (torch 2.11): `ExpandableSegment`, `find_expandable_block`,
`map_block`, `try_allocate_expandable_block`, `unmap_block`; not copied from it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass


@dataclass
class ExpandableSegment:
    base: int
    page: int  # 2 MiB (small pool) or 20 MiB (large pool)
    size: int  # virtual size: 1 1/8 of the GPU's memory, in whole pages


class ExpandableSegments:
    """Mixin of CachingAllocatorModel: the expandable-segment half of getting new memory.
    Uses the model's `Block` class, `SMALL_PAGE` / `LARGE_PAGE`, `_merge`, `_add_stat`."""

    def _expandable_block(self, pool: object, size: int, stream: int) -> object:
        c = self._find_expandable(pool, size, stream)
        if not c.mapped and not self._map(pool, c, min(c.size, size)):
            return None
        while c.size < size:  # free mapped space, then unmapped pages right after it
            nxt = c.next
            if not self._map(pool, nxt, min(size - c.size, nxt.size)):
                return None
            c = nxt  # the newly mapped block absorbed c
        pool.remove(c)
        return c

    def _find_expandable(self, pool: object, size: int, stream: int) -> object:
        def free(b):
            return b is not None and not b.allocated and not b.events

        i = bisect.bisect_left(pool.unmapped, (stream, 0))
        for k in pool.unmapped[i:]:
            if k[0] != stream:
                break
            c = pool.unmapped_blocks[k]
            if free(c.prev):
                c = c.prev
            room, b = 0, c
            while room < size and free(b):
                room, b = room + b.size, b.next
            if room >= size:
                return c
        page = self.SMALL_PAGE if pool.small else self.LARGE_PAGE
        virtual = -(-(self.total + self.total // 8) // page) * page
        seg = ExpandableSegment(self._addr(), page, virtual)
        c = self.Block(seg.base, virtual, stream, pool.small, seg, mapped=False)
        pool.add_unmapped(c)
        return c

    def _map(self, pool: object, b: object, size: int) -> bool:
        seg = b.seg
        start = b.addr - seg.base  # unmapped ranges start on a page
        end = -(-(start + size) // seg.page) * seg.page
        mapped = end - start
        if self.device_free is not None and self.stats.reserved + mapped > self.device_free:
            return False
        pool.remove_unmapped(b)
        b.mapped = True
        if mapped < b.size:
            rest = self.Block(b.addr + mapped, b.size - mapped, b.stream, b.small, seg, mapped=False)
            rest.prev, rest.next = b, b.next
            if b.next is not None:
                b.next.prev = rest
            b.next, b.size = rest, mapped
            pool.add_unmapped(rest)
        self._merge(b, b.prev, pool)
        self._merge(b, b.next, pool)
        pool.add(b)
        self._add_stat("reserved", mapped)
        self.stats.num_device_alloc += 1
        return True

    def _unmap(self, pool: object, b: object) -> None:
        """Give back the whole pages inside free block `b` of an expandable segment."""
        seg, off = b.seg, b.addr - b.seg.base
        lo = -(-off // seg.page) * seg.page
        hi = (off + b.size) // seg.page * seg.page
        if lo >= hi:
            return
        pool.remove(b)
        before, after = lo - off, off + b.size - hi
        if before:
            head = self.Block(b.addr, before, b.stream, b.small, seg)
            head.prev, head.next = b.prev, b
            if b.prev is not None:
                b.prev.next = head
            b.prev = head
            pool.add(head)
        if after:
            tail = self.Block(seg.base + hi, after, b.stream, b.small, seg)
            tail.prev, tail.next = b, b.next
            if b.next is not None:
                b.next.prev = tail
            b.next = tail
            pool.add(tail)
        b.addr, b.size, b.mapped = seg.base + lo, hi - lo, False
        self._merge(b, b.prev, pool)
        self._merge(b, b.next, pool)
        if b.is_split:
            pool.add_unmapped(b)
        # else: the whole segment is unmapped and goes away (release_expandable_segment)
        self._add_stat("reserved", -(hi - lo))
        self.stats.num_device_free += 1
