"""Streams in the allocator model (lab.measure.sim.allocator.streams), against cases worked out
by hand from c10/cuda/CUDACachingAllocator.cpp: per-stream pools, record_stream, a freed block
waiting for its streams' events, the synchronisation points that complete them."""

import pytest

from lab.measure import snapshot_format as fmt
from lab.measure.sim.allocator.model import AllocatorOutOfMemory, CachingAllocatorModel
from lab.measure.sim.allocator.replay import Replay, replay
from lab.measure.sim.allocator.view import memory_snapshot, memory_stats

MiB = 1 << 20
SIDE = 1  # a second stream


def test_a_block_freed_on_one_stream_is_not_reused_by_another():
    a = CachingAllocatorModel()
    a.free(a.malloc(100 * MiB))
    a.malloc(100 * MiB, stream=SIDE)
    assert a.stats.reserved == 200 * MiB  # the default stream's cached block stays its own
    a.malloc(100 * MiB)
    assert a.stats.reserved == 200 * MiB  # ... and is reused on its own stream


def test_a_use_on_its_own_stream_records_nothing():
    a = CachingAllocatorModel()
    x = a.malloc(100 * MiB)
    a.record_stream(x, 0)
    a.free(x)
    a.malloc(100 * MiB)
    assert a.stats.reserved == 100 * MiB and not a.waiting


def test_a_recorded_block_waits_for_its_stream_then_comes_back():
    a = CachingAllocatorModel()
    x = a.malloc(100 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    # memory_allocated() drops at the free; the block is active until SIDE's event completes
    assert a.stats.allocated == 0 and a.active_bytes == 100 * MiB and a.waiting
    y = a.malloc(100 * MiB)  # SIDE has not synchronized: a new segment
    assert a.stats.reserved == 200 * MiB and y.addr != x.addr
    a.synchronize(SIDE)
    a.free(y)
    z = a.malloc(100 * MiB)  # the malloc processes the events first: x's block is back
    assert a.stats.reserved == 200 * MiB and not a.waiting and a.active_bytes == 100 * MiB
    assert z.addr in (x.addr, y.addr)


def test_synchronizing_another_stream_completes_nothing():
    a = CachingAllocatorModel()
    x = a.malloc(100 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    a.synchronize(2)
    a.malloc(100 * MiB)
    assert a.stats.reserved == 200 * MiB
    a.synchronize()  # torch.cuda.synchronize(): every stream
    a.malloc(100 * MiB)
    assert a.stats.reserved == 200 * MiB and not a.waiting


def test_an_event_mark_completes_only_what_was_recorded_before_it():
    a = CachingAllocatorModel()
    x, y = a.malloc(100 * MiB), a.malloc(100 * MiB)
    for b in (x, y):
        a.record_stream(b, SIDE)
    a.free(x)
    mark = a.event()  # Event.record(SIDE) here
    a.free(y)
    a.synchronize(SIDE, upto=mark)  # Event.synchronize()
    a.process_events()
    assert a.active_bytes == 100 * MiB  # y still waits


def test_a_block_used_on_two_streams_waits_for_both():
    a = CachingAllocatorModel()
    x = a.malloc(100 * MiB)
    a.record_stream(x, 1)
    a.record_stream(x, 2)
    a.free(x)
    a.synchronize(1)
    a.process_events()
    assert a.active_bytes == 100 * MiB
    a.synchronize(2)
    a.process_events()
    assert a.active_bytes == 0


def test_a_waiting_block_is_not_merged_with_its_free_neighbours():
    a = CachingAllocatorModel()
    x = a.malloc(3 * MiB)  # a 20 MiB segment, split
    y = a.malloc(3 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    a.free(y)  # y's neighbour x waits: y merges only with the rest after it
    assert sorted(b.size for b in a.large.blocks.values()) == [17 * MiB]
    a.synchronize(SIDE)
    a.process_events()
    assert sorted(b.size for b in a.large.blocks.values()) == [20 * MiB]


def test_empty_cache_waits_for_every_stream_first():
    a = CachingAllocatorModel()
    x = a.malloc(100 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    a.release_cached()
    assert a.stats.reserved == 0 and not a.waiting and a.num_sync_all_streams == 1


def test_the_last_resort_before_out_of_memory_waits_for_the_events():
    a = CachingAllocatorModel(cap=150 * MiB)
    x = a.malloc(100 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    a.malloc(120 * MiB)  # no room for a new segment: wait for SIDE, free x's segment, retry
    assert a.stats.num_alloc_retries == 1 and a.stats.reserved == 120 * MiB
    with pytest.raises(AllocatorOutOfMemory):
        a.malloc(100 * MiB)


def test_memory_stats_and_snapshot_show_the_waiting_block():
    a = CachingAllocatorModel()
    x, keep = a.malloc(3 * MiB), a.malloc(3 * MiB)
    a.record_stream(x, SIDE)
    a.free(x)
    st = memory_stats(a)
    assert st["allocated_bytes.all.current"] == 3 * MiB
    assert st["active_bytes.all.current"] == 6 * MiB and st["allocation.all.current"] == 1
    states = [b["state"] for seg in memory_snapshot(a) for b in seg["blocks"]]
    assert states == [fmt.ACTIVE_PENDING_FREE, fmt.ACTIVE_ALLOCATED, fmt.INACTIVE]
    assert memory_snapshot(a)[0]["active_size"] == 6 * MiB
    assert keep.allocated


def test_a_recorded_replay_log_replays_the_same_streams():
    live = Replay(record=True)
    live.alloc("x", 100 * MiB)
    live.record_stream("x", SIDE)
    live.free("x")
    live.alloc("y", 100 * MiB)  # a new segment: x waits
    live.synchronize(SIDE)
    live.free("y")
    live.alloc("z", 100 * MiB)
    got = live.finish()
    assert got.peak_reserved == 200 * MiB
    again = replay(live.log)
    assert (again.peak_reserved, again.peak_allocated) == (got.peak_reserved, got.peak_allocated)
    assert ("record_stream", "x", SIDE) in live.log


def test_synchronize_with_nothing_waiting_logs_nothing():
    live = Replay(record=True)
    live.alloc("x", MiB)
    live.synchronize()
    assert live.log == [("alloc", "x", MiB)]


def test_a_trace_with_a_late_free_completion_replays_to_the_byte():
    from lab.measure.sim.allocator.stream_trace import replay_stream_trace

    a, b, side = 1 << 40, 2 << 40, 0x55
    trace = [(fmt.SEGMENT_ALLOC, a, 100 * MiB, 0), (fmt.ALLOC, a, 100 * MiB, 0),
             (fmt.FREE_REQUESTED, a, 100 * MiB, 0),  # used on `side`: its free waits
             (fmt.SEGMENT_ALLOC, b, 100 * MiB, side), (fmt.ALLOC, b, 100 * MiB, side),
             (fmt.FREE_REQUESTED, b, 100 * MiB, side), (fmt.FREE, b, 100 * MiB, side),
             (fmt.SEGMENT_ALLOC, b + MiB, 100 * MiB, 0), (fmt.ALLOC, b + MiB, 100 * MiB, 0),
             (fmt.FREE, a, 100 * MiB, 0),  # the event passed: a is back
             (fmt.ALLOC, a, 100 * MiB, 0)]
    got = replay_stream_trace(trace)
    assert got == {"allocated": 200 * MiB, "reserved": 300 * MiB, "active": 200 * MiB,
                   "oom": False, "retries": 0, "segments_freed": 0, "waited": 1}
