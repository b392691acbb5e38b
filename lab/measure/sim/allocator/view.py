"""The allocator model as `torch.cuda.memory_stats()` and `torch.cuda.memory_snapshot()` show it.

So an experiment can ask the same questions in sim as on a GPU (sim's policy routes those calls
here). The keys and their meaning follow c10/cuda/CUDACachingAllocator.cpp's `DeviceStats`
(stored copies named in lab/measure/sim/allocator/settings.py):

  allocated_bytes.all.current|peak   the handed-out blocks (requests rounded up, unsplit rests)
  reserved_bytes.all.current|peak    the segments (mapped pages of expandable ones)
  active_bytes.all.current|peak      allocated, plus freed blocks that wait for other streams'
                                     events (record_stream: lab.measure.sim.allocator.streams)
  inactive_split_bytes.all.current   free blocks inside segments that also hold a live block:
                                     the holes, which neither a larger request nor empty_cache()
                                     can use (expandable segments are left out, as PyTorch does)
  inactive_split.all.current         how many such holes
  segment.all.current                cudaMalloc'd segments (expandable: mapped ranges)
  num_alloc_retries                  times every cached segment was freed to retry a cudaMalloc
  num_sync_all_streams               times every stream's events were waited for (empty_cache,
                                     that retry)
  num_ooms, num_device_alloc, num_device_free
  oversize_allocations.current       live blocks of max_split_size or more
  oversize_segments.current          cached or live cudaMalloc'd segments of that size

Peaks are the run's (the model keeps no separate reset_peak_memory_stats() window).
"""

from __future__ import annotations

from ... import snapshot_format as fmt
from .model import CachingAllocatorModel


def _all_blocks(m: CachingAllocatorModel):
    for pool in (m.small, m.large):
        yield from pool.blocks.values()
    yield from m.active


def _segment_heads(m: CachingAllocatorModel):
    """The first block of every segment (for expandable ones: of every mapped range)."""
    for b in _all_blocks(m):
        if b.mapped and (b.prev is None or not b.prev.mapped):
            yield b


def memory_stats(m: CachingAllocatorModel) -> dict[str, int]:
    s = m.stats
    holes = [b for pool in (m.small, m.large) for b in pool.blocks.values()
             if b.is_split and b.seg is None]
    heads = list(_segment_heads(m))
    limit = m.max_split_size
    seg_sizes = [sum(_walk_sizes(h)) for h in heads if h.seg is None]
    out = {
        "allocated_bytes.all.current": s.allocated, "allocated_bytes.all.peak": s.peak_allocated,
        "reserved_bytes.all.current": s.reserved, "reserved_bytes.all.peak": s.peak_reserved,
        "active_bytes.all.current": m.active_bytes,
        "active_bytes.all.peak": max(s.peak_allocated, m.peak_active),
        "inactive_split_bytes.all.current": sum(b.size for b in holes),
        "inactive_split.all.current": len(holes),
        "allocation.all.current": sum(b.allocated for b in m.active),
        "segment.all.current": len(heads),
        "num_alloc_retries": s.num_alloc_retries, "num_ooms": s.num_ooms,
        "num_sync_all_streams": m.num_sync_all_streams,
        "num_device_alloc": s.num_device_alloc, "num_device_free": s.num_device_free,
        "oversize_allocations.current": sum(b.allocated and b.size >= limit for b in m.active),
        "oversize_segments.current": sum(n >= limit for n in seg_sizes),
        "max_split_size": -1 if limit == m.UNLIMITED else limit,
    }
    return out


def _walk_sizes(head):
    b = head
    while b is not None and b.mapped:
        yield b.size
        b = b.next


def memory_snapshot(m: CachingAllocatorModel) -> list[dict]:
    """Segments as `torch.cuda.memory_snapshot()` lists them, by address; addresses are the
    model's (synthetic), sizes and states are what the GPU's allocator would hold."""
    out = []
    for head in sorted(_segment_heads(m), key=lambda b: b.addr):
        blocks, b = [], head
        while b is not None and b.mapped:
            active = b.allocated or b.events > 0  # a freed block waiting for other streams
            blocks.append({"address": b.addr, "size": b.size,
                           "requested_size": b.requested if active else 0,
                           "state": (fmt.ACTIVE_ALLOCATED if b.allocated else
                                     fmt.ACTIVE_PENDING_FREE if active else fmt.INACTIVE),
                           "frames": []})
            b = b.next
        total = sum(x["size"] for x in blocks)
        used = sum(x["size"] for x in blocks if x["state"] == fmt.ACTIVE_ALLOCATED)
        active = sum(x["size"] for x in blocks if x["state"] != fmt.INACTIVE)
        out.append({"device": 0, "address": head.addr, "total_size": total,
                    "allocated_size": used, "active_size": active,
                    "requested_size": sum(x["requested_size"] for x in blocks),
                    "stream": head.stream, "segment_type": "small" if head.small else "large",
                    "segment_pool_id": (0, 0), "is_expandable": head.seg is not None,
                    "frames": [], "blocks": blocks})
    return out


__all__ = ["memory_snapshot", "memory_stats"]
