"""The caching-allocator model against hand-computed cases (c10/cuda/CUDACachingAllocator.cpp)."""

import pytest

from lab.measure.sim.allocator.model import (
    AllocatorOutOfMemory,
    CachingAllocatorModel,
    allocation_size,
    round_size,
)

MiB, GiB = 1 << 20, 1 << 30


def test_requests_round_up_to_512_bytes():
    assert [round_size(n) for n in (0, 1, 512, 513, 1000)] == [512, 512, 512, 1024, 1024]


def test_segment_sizes_by_request():
    assert allocation_size(512) == 2 * MiB  # small pool: 2 MiB segments
    assert allocation_size(MiB) == 2 * MiB  # 1 MiB is still small
    assert allocation_size(MiB + 512) == 20 * MiB  # 1-10 MiB: a 20 MiB segment to split
    assert allocation_size(10 * MiB - 512) == 20 * MiB
    assert allocation_size(10 * MiB) == 10 * MiB  # from 10 MiB: rounded up to 2 MiB
    assert allocation_size(10 * MiB + 512) == 12 * MiB


def test_small_requests_share_one_2mib_segment():
    a = CachingAllocatorModel()
    blocks = [a.malloc(100) for _ in range(4)]
    assert a.stats.allocated == 4 * 512 and a.stats.reserved == 2 * MiB
    assert len({b.addr for b in blocks}) == 4


def test_large_block_keeps_an_unsplit_remainder_under_1mib():
    # lesson 01 at seed scale: weight 2e9 B, bias 200,000 B (the H200 shows +683,200 B)
    a = CachingAllocatorModel()
    a.malloc(2_000_000_000)
    a.malloc(200_000)
    assert a.stats.allocated == 2_000_683_008 + 200_192
    assert a.stats.allocated - 2_000_200_000 == 683_200
    # the 1e9 B output: rounded to 2 MiB, the 341,504 B rest is not worth a block of its own
    a.malloc(1_000_000_000)
    assert a.stats.allocated - 3_000_200_000 == 683_200 + 341_504


def test_a_20mib_segment_is_split_and_its_rest_reused():
    a = CachingAllocatorModel()
    x = a.malloc(3 * MiB)
    assert a.stats.reserved == 20 * MiB and a.stats.allocated == 3 * MiB  # 17 MiB rest: split
    y = a.malloc(5 * MiB)  # fits in the cached rest: no new segment
    assert a.stats.reserved == 20 * MiB and y.addr == x.addr + 3 * MiB
    a.free(x)
    a.free(y)
    assert a.stats.allocated == 0 and a.stats.reserved == 20 * MiB  # cached, not given back


def test_best_fit_takes_the_smallest_cached_block_that_fits():
    a = CachingAllocatorModel()
    big, small = a.malloc(50 * MiB), a.malloc(30 * MiB)
    a.free(big)
    a.free(small)
    got = a.malloc(29 * MiB + MiB // 2)
    assert got.addr == small.addr  # the 30 MiB block, not the 50 MiB one
    assert a.stats.allocated == 30 * MiB  # a 0.5 MiB rest is not split off: all 30 MiB count
    a.malloc(28 * MiB)  # from the 50 MiB block; its 22 MiB rest is split off
    assert a.stats.allocated == 58 * MiB and a.stats.reserved == 80 * MiB


def test_release_cached_segments_and_retry_before_oom():
    a = CachingAllocatorModel(cap=100 * MiB)
    a.free(a.malloc(60 * MiB))  # 60 MiB cached
    a.malloc(80 * MiB)  # 60 + 80 > 100: free the cached segment, then it fits
    assert a.stats.num_alloc_retries == 1 and a.stats.reserved == 80 * MiB
    assert a.stats.peak_reserved == 80 * MiB


def test_oom_when_nothing_cached_can_go():
    a = CachingAllocatorModel(cap=100 * MiB)
    a.malloc(60 * MiB)
    with pytest.raises(AllocatorOutOfMemory) as e:
        a.malloc(50 * MiB)
    assert e.value.requested == 50 * MiB and a.stats.num_ooms == 1
    assert a.stats.reserved == 60 * MiB


def _fragment(a: CachingAllocatorModel) -> list:
    """Carve 8 x 1 GiB out of one cached 8 GiB segment, free every other block."""
    a.free(a.malloc(8 * GiB))
    blocks = [a.malloc(GiB) for _ in range(8)]
    for b in blocks[::2]:
        a.free(b)
    return blocks[1::2]


def test_fragmentation_inside_a_segment_is_an_oom():
    a = CachingAllocatorModel(cap=9 * GiB)
    _fragment(a)
    assert a.stats.reserved == 8 * GiB and a.stats.allocated == 4 * GiB
    with pytest.raises(AllocatorOutOfMemory):
        a.malloc(2 * GiB)  # 4 GiB free, but in 1 GiB holes of a segment that is still in use


def test_expandable_segments_map_20mib_pages():
    a = CachingAllocatorModel(expandable_segments=True)
    a.malloc(GiB)
    assert a.stats.allocated == GiB  # split at 512 B: no remainder counted
    assert a.stats.reserved == 52 * 20 * MiB  # 51.2 pages -> 52
    a.malloc(GiB)  # grows the same segment: the mapped rest of the first page first
    assert a.stats.reserved == 103 * 20 * MiB  # ceil(2 GiB / 20 MiB)


def test_expandable_segments_unmap_holes_and_fit():
    a = CachingAllocatorModel(cap=9 * GiB, expandable_segments=True)
    _fragment(a)
    a.malloc(2 * GiB)  # the whole free pages of the holes go back, the tail grows
    assert a.stats.num_alloc_retries == 1 and a.stats.num_ooms == 0
    assert a.stats.allocated == 6 * GiB and a.stats.reserved <= 9 * GiB


def test_empty_cache_gives_back_whole_free_segments_only():
    a = CachingAllocatorModel()
    x = a.malloc(3 * MiB)  # in a 20 MiB segment
    a.free(a.malloc(40 * MiB))  # its own 40 MiB segment, free
    a.release_cached()
    assert a.stats.reserved == 20 * MiB  # the 20 MiB segment still holds x
    a.free(x)
    a.release_cached()
    assert a.stats.reserved == 0


def test_replay_of_a_real_h200_trace_makes_the_same_segments():
    """tests/fixtures/h200_snapshot.pickle: an MLP, three AdamW steps, then torch.empty(10**14)."""
    import pickle
    from pathlib import Path

    from lab.measure.sim.allocator.replay import replay

    snap = pickle.loads((Path(__file__).parents[1] / "fixtures" / "h200_snapshot.pickle").read_bytes())
    events, real, free = [], [], None
    for t in snap["device_traces"][0]:
        a = t["action"]
        if a == "alloc":
            events.append(("alloc", t["addr"], t["size"]))
        elif a == "free_completed":
            events.append(("free", t["addr"]))
        elif a in ("segment_alloc", "segment_free"):
            real.append(t["size"] if a == "segment_alloc" else -t["size"])
        elif a == "oom":
            events.append(("alloc", "huge", t["size"]))
            free = t["device_free"]
    r = replay(events, series=True, device_free=free)
    made = [b - a for (_, a), (_, b) in zip([(0, 0)] + r.reserved_series, r.reserved_series)]
    # every cudaMalloc in order, then (in one step) the cached segments given back before the OOM
    assert made[:-1] == [n for n in real if n > 0]
    assert made[-1] == sum(n for n in real if n < 0) == -310_378_496
    assert r.oom is not None and r.oom.index == len(events) - 1 and r.num_alloc_retries == 1


def test_replays_of_h200_allocator_traces_match_to_the_byte():
    """tests/fixtures/h200_allocator_traces.json.gz (bench/probe_cuda.py on the H200, cut by
    bench/sim_allocator_traces.py --fixture): GPT-2 bf16, lesson 18 at the OOM boundary under a
    16 GiB cap (batch 9 fails, bf16+ckpt batch 20 fits after a release-and-retry), expandable
    segments switched on at run time. With the GPU's segment addresses (best fit breaks ties by
    address), the model's peaks, OOM and retries equal the GPU's exactly."""
    import gzip
    import json
    from pathlib import Path

    from lab.measure.sim.allocator.replay import replay_cuda_trace

    path = Path(__file__).parents[1] / "fixtures" / "h200_allocator_traces.json.gz"
    runs = json.loads(gzip.open(path, "rt").read())
    assert len(runs) == 4
    for run in runs:
        got, real = replay_cuda_trace(run["events"], cap=run["cap"]), run["real"]
        assert {k: got[k] for k in real} == real, (run["lesson"], run["variant"], run["overrides"])


@pytest.mark.slow  # the quick tier's 2 minutes: a sim run, then its replays, ~7 CPU-s
def test_a_recorded_sim_run_replays_offline_under_any_cap():
    """What `memlab fit` builds on: run sim once without a cap, recording what the allocator model
    received; replaying the log gives the same peaks, and under a cap the same OOM as a capped run."""
    import torch

    from lab.measure.sim.allocator.replay import Replay, replay
    from lab.measure.session import Session
    from lab.measure.sim.dispatch.fake_mode import fake_mode
    from lab.measure.sim.dispatch.policy import CudaPaths
    from lab.measure.tracker import TensorTracker
    from lab.workloads.config import TrainConfig
    from lab.workloads.registry import LAYOUTS, Layout
    from lab.workloads.tasks import LM
    from lab.workloads.train import train

    LAYOUTS["t-alloc"] = Layout("t-alloc", "gpt2", 512, 2, 4, 256, 128)
    task, cfg = LM("t-alloc", 4, 128), TrainConfig(precision="bf16")

    def run(cap=None):
        from lab.measure.backends.sim import SimBackend

        alloc = Replay(cap=cap, record=True)
        backend = SimBackend(allocator=alloc)
        tr = backend.new_tracker()
        try:
            with backend.running(), tr:
                train(Session(backend, {}, tr), task, cfg, 2)
        except torch.OutOfMemoryError:
            pass
        return alloc

    full = run()
    online = full.finish()
    offline = replay(full.log)
    assert (offline.peak_allocated, offline.peak_reserved) == (online.peak_allocated, online.peak_reserved)
    cap = online.peak_reserved - 2 * 2**20
    capped = run(cap).finish()
    again = replay(full.log, cap=cap)
    assert capped.oom is not None and again.oom is not None
    assert (again.oom.requested, again.oom.allocated) == (capped.oom.requested, capped.oom.allocated)
    del LAYOUTS["t-alloc"]


def test_a_freed_block_is_reused_only_by_its_own_stream():
    """The caching allocator keeps each stream's free blocks apart (FSDP2's all-gather and
    reduce-scatter streams): a block freed on stream 1 does not serve stream 0."""
    from lab.measure.sim.allocator.replay import replay

    mb = 2**20
    same = replay([("alloc", "a", 64 * mb, 1), ("free", "a"), ("alloc", "b", 64 * mb, 1)])
    apart = replay([("alloc", "a", 64 * mb, 1), ("free", "a"), ("alloc", "b", 64 * mb)])
    assert same.peak_reserved == 64 * mb
    assert apart.peak_reserved == 128 * mb


def test_sim_allocates_on_the_stream_the_code_selected():
    import torch

    from lab.measure.backends.sim import new_allocator

    allocator = new_allocator(None)
    side = torch.cpu.Stream()
    assert allocator.current_stream() == 0
    with torch.cpu.stream(side):
        first = allocator.current_stream()
        assert first != 0
        with torch.cpu.stream(torch.cpu.current_stream()):
            assert allocator.current_stream() == first
    with torch.cpu.stream(torch.cpu.Stream()):
        assert allocator.current_stream() not in (0, first)
    assert allocator.current_stream() == 0


def test_relayout_remakes_live_blocks_and_frees_them_with_the_old_key():
    """DDP's bucket rebuild, as sim tells the allocator model: one 100 MB bucket remade as four
    25 MB ones; they carve the freed block (nothing new reserved), and go when the old key does."""
    from lab.measure.sim.allocator.replay import Replay

    mb = 2**20
    r = Replay()
    r.alloc("bucket", 100 * mb)
    r.relayout(["bucket"], [25 * mb] * 4)
    assert r.model.stats.allocated == 100 * mb
    assert r.model.stats.reserved == 100 * mb
    r.free("bucket")
    assert r.model.stats.allocated == 0
