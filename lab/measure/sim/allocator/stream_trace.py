"""Replay a CUDA allocator trace that has streams through the model, each free completed where
the trace says it completed.

The caching allocator's own trace (`torch.cuda.memory._snapshot()["device_traces"]`, history on)
names each entry's stream, and splits a free in two: `free_requested` when the tensor died
(memory_allocated() drops), `free_completed` when the block is back in its pool - at once for a
block used on its own stream only, later for one recorded on other streams (record_stream), when
the allocator saw their events complete (c10/cuda/CUDACachingAllocator.cpp: `free`, then
`process_events` at a later malloc, or `synchronize_and_free_events` in empty_cache). Replayed
here: a free whose completion comes later is a block with stream uses, on a stream key of its
own, synchronized at its `free_completed` (lab.measure.sim.allocator.streams' API). So the
replay checks the model's per-stream pools and waiting blocks against the GPU, given the GPU's
own event timing; when events complete without the trace (sim), the model's rule decides.

    replay_stream_trace(entries, cap=None)   # entries: (action, addr, size, stream)
        -> {"allocated", "reserved", "active", "oom", "retries", "segments_freed", "waited"}

`segment_free` entries are the model's to reproduce (an allocation's retry, garbage collection,
oversize blocks), as in `replay.replay_cuda_trace`; a trace with empty_cache() calls in it passes
`empty_cache_at` (the indices of the entries where the script called it).
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain, count

from ... import snapshot_format as fmt
from .replay import Replay, SimulatedOutOfMemory
from .settings import AllocatorSettings


def replay_stream_trace(entries: Iterable[tuple], *, cap: int | None = None,
                        real_addresses: bool = True, settings: AllocatorSettings | None = None,
                        empty_cache_at: Iterable[int] = ()) -> dict:
    """`entries`: (action, addr, size, stream) in the trace's order. `real_addresses`: new
    segments take the GPU's addresses, in order (best fit breaks ties by address)."""
    entries = list(entries)
    addrs = chain((e[1] for e in entries if e[0] == fmt.SEGMENT_ALLOC), count(1 << 50, 1 << 44))
    r = Replay(cap=cap, next_address=(lambda: next(addrs)) if real_addresses else None,
               settings=settings)
    m = r.model
    waiting: dict[int, tuple] = {}  # addr -> the stream key its free waits on
    skip_completion: set[int] = set()
    oom = False
    waited = 0
    empty_cache_at = set(empty_cache_at)
    for i, (act, addr, size, stream) in enumerate(entries):
        if i in empty_cache_at:
            r.empty_cache()
        try:
            if act == fmt.ALLOC:
                r.alloc(addr, size, stream)
            elif act == fmt.FREE_REQUESTED:
                nxt = entries[i + 1] if i + 1 < len(entries) else None
                if nxt is not None and nxt[0] == fmt.FREE and nxt[1] == addr:
                    skip_completion.add(addr)  # completed at once: no stream uses
                elif addr in r.live:
                    key = ("free", i)
                    r.record_stream(addr, key)
                    waiting[addr] = key
                    waited += 1
                r.free(addr)
            elif act == fmt.FREE:
                if addr in skip_completion:
                    skip_completion.discard(addr)
                elif addr in waiting:
                    r.synchronize(waiting.pop(addr))
                    m.process_events()
            elif act == fmt.SEGMENT_MAP and not m.expandable_segments:
                r.set_expandable(True)  # switched on at run time
            elif act == fmt.OOM:
                r.alloc("oom", size, stream)
        except SimulatedOutOfMemory:
            oom = True
    res = r.finish()
    return {"allocated": res.peak_allocated, "reserved": res.peak_reserved,
            "active": max(res.peak_allocated, m.peak_active), "oom": oom,
            "retries": res.num_alloc_retries, "segments_freed": m.stats.num_device_free,
            "waited": waited}


__all__ = ["replay_stream_trace"]
