"""PYTORCH_CUDA_ALLOC_CONF in the allocator model: parsing, rounding, max_split_size_mb,
garbage_collection_threshold and the counters memory_stats() reports, on hand-computed cases
(the rules: lab/measure/sim/allocator/settings.py, release.py)."""

import pytest

from lab.measure.sim.allocator.model import AllocatorOutOfMemory, CachingAllocatorModel, round_size
from lab.measure.sim.allocator.replay import Replay, replay
from lab.measure.sim.allocator.settings import (AllocatorSettings, AllocatorSettingsError,
                                                UNLIMITED, parse_alloc_conf, settings_from_env)
from lab.measure.sim.allocator.view import memory_snapshot, memory_stats

MiB, GiB = 1 << 20, 1 << 30


def model(conf: str = "", cap: int | None = None) -> CachingAllocatorModel:
    m = CachingAllocatorModel(cap=cap)
    m.apply(parse_alloc_conf(conf))
    return m


# ---- parsing ---------------------------------------------------------------------------------
def test_parse_the_settings_the_model_knows():
    s = parse_alloc_conf("max_split_size_mb:256, garbage_collection_threshold:0.6,"
                         "expandable_segments:True,roundup_power2_divisions:4")
    assert s.max_split_size == 256 * MiB and s.garbage_collection_threshold == 0.6
    assert s.expandable_segments and s.roundup_power2_divisions == (4,) * 16


def test_a_divisions_list_fills_intervals_as_torch_does():
    # 64:8 starts at index 6 and fills everything below; 256:4 is index 8; index 7 (128 MiB)
    # keeps 0; ">" fills what follows the last key
    s = parse_alloc_conf("roundup_power2_divisions:[64:8,256:4,>:1]")
    assert s.roundup_power2_divisions == (8,) * 7 + (0, 4) + (1,) * 7


def test_every_parse_resets_three_settings_and_keeps_expandable():
    s = parse_alloc_conf("max_split_size_mb:256,garbage_collection_threshold:0.5")
    s = parse_alloc_conf("expandable_segments:True", s)
    assert s.max_split_size == UNLIMITED and s.garbage_collection_threshold == 0
    s = parse_alloc_conf("max_split_size_mb:300", s)
    assert s.expandable_segments and s.max_split_size == 300 * MiB


@pytest.mark.parametrize("conf, words", [
    ("max_split_size_mb:10", "too small"),
    ("garbage_collection_threshold:1.5", "(0.0, 1.0)"),
    ("roundup_power2_divisions:3", "power of two"),
    ("expandable_segments:yes", "True or False"),
    ("max_split_size_mb", "expected ':'"),
    ("backend:cudaMallocAsync", "not modelled"),
    ("no_such_setting:1", "unknown allocator setting"),
])
def test_refused_settings_say_why_in_one_line(conf, words):
    with pytest.raises(AllocatorSettingsError) as e:
        parse_alloc_conf(conf)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_pytorch_alloc_conf_wins_over_the_cuda_name():
    env = {"PYTORCH_ALLOC_CONF": "max_split_size_mb:64", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    s = settings_from_env(env)
    assert s.max_split_size == 64 * MiB and not s.expandable_segments
    assert settings_from_env({}) == AllocatorSettings()


# ---- rounding ----------------------------------------------------------------------------------
def test_roundup_power2_divisions_round_to_steps_between_powers_of_two():
    four = (4,) * 16
    assert round_size(1000 * MiB + 1, four) == 1024 * MiB  # 512 MiB .. 1 GiB in 128 MiB steps
    assert round_size(600 * MiB, four) == 640 * MiB
    assert round_size(512 * MiB, four) == 512 * MiB  # a power of two stays
    assert round_size(1200, four) == 1536  # not above 512 B x 4: plain 512 B rounding
    assert round_size(600 * MiB) == 600 * MiB  # without the setting


# ---- max_split_size_mb -------------------------------------------------------------------------
def _split_then_big(m: CachingAllocatorModel):
    """A 2 GiB tensor freed, a 100 MiB one kept, a 2 GiB one asked for again."""
    m.free(m.malloc(2 * GiB))
    keep = m.malloc(100 * MiB)
    return keep, m.malloc(2 * GiB)


def test_without_max_split_size_a_small_request_cuts_the_cached_big_block():
    m = model(cap=3 * GiB)
    with pytest.raises(AllocatorOutOfMemory):
        _split_then_big(m)
    assert memory_stats(m)["inactive_split_bytes.all.current"] == 2 * GiB - 100 * MiB


def test_max_split_size_keeps_the_big_block_whole_for_the_big_request():
    m = model("max_split_size_mb:1024", cap=3 * GiB)
    keep, big = _split_then_big(m)
    assert keep.size == 100 * MiB and m.stats.reserved == 2 * GiB + 100 * MiB
    assert big.size == 2 * GiB and m.stats.num_alloc_retries == 0
    assert memory_stats(m)["oversize_allocations.current"] == 1


def test_an_oversize_block_serves_a_request_only_within_20_mib():
    m = model("max_split_size_mb:1024")
    m.free(m.malloc(1100 * MiB))
    near = m.malloc(1090 * MiB)  # 10 MiB less: takes the whole block
    assert near.size == 1100 * MiB and m.stats.segments == 1
    m.free(near)
    far = m.malloc(1060 * MiB)  # 40 MiB less: a segment of its own
    assert far.size == 1060 * MiB and m.stats.segments == 2


def test_oversize_blocks_are_freed_before_the_last_resort():
    # one cached oversize block large enough (but too large to hand out): freed, no retry
    m = model("max_split_size_mb:1024", cap=3 * GiB)
    m.free(m.malloc(2500 * MiB))
    m.malloc(1100 * MiB)
    assert m.stats.reserved == 1100 * MiB and m.stats.num_alloc_retries == 0
    assert m.stats.num_device_free == 1
    # none large enough: the largest ones of the stream until they cover the request
    m = model("max_split_size_mb:1024", cap=3 * GiB)
    a, c = m.malloc(1100 * MiB), m.malloc(1200 * MiB)
    m.free(a)
    m.free(c)
    m.malloc(1500 * MiB)
    assert m.stats.reserved == 1500 * MiB and m.stats.num_alloc_retries == 0


# ---- garbage_collection_threshold --------------------------------------------------------------
def _grow(m: CachingAllocatorModel, sizes_mib):
    for n in sizes_mib:
        m.free(m.malloc(n * MiB))


def test_garbage_collection_frees_the_oldest_cached_segments():
    m = model("garbage_collection_threshold:0.5", cap=1000 * MiB)
    _grow(m, [200, 210, 220])
    assert m.stats.reserved == 630 * MiB  # under 500 MiB at each miss: nothing collected
    _grow(m, [230])
    # 630 > 500: ages 3, 2, 1 (searches since cached), average 2: the 200 and 210 MiB go
    assert m.stats.reserved == 450 * MiB and m.stats.num_device_free == 2
    _grow(m, [240, 250])
    assert m.stats.num_alloc_retries == 0


def test_without_garbage_collection_the_cache_fills_until_a_retry():
    m = model(cap=1000 * MiB)
    _grow(m, [200, 210, 220, 230])
    assert m.stats.reserved == 860 * MiB
    _grow(m, [240])  # 860 + 240 > 1000: every cached segment freed, then it fits
    assert m.stats.num_alloc_retries == 1 and m.stats.reserved == 240 * MiB


def test_garbage_collection_needs_a_memory_fraction():
    m = model("garbage_collection_threshold:0.5")  # no cap: set_per_process_memory_fraction unset
    _grow(m, [200, 210, 220, 230])
    assert m.stats.reserved == 860 * MiB


# ---- what memory_stats() and memory_snapshot() report -----------------------------------------
def test_snapshot_segments_add_up_to_reserved():
    m = model()
    m.free(m.malloc(8 * GiB))
    blocks = [m.malloc(GiB) for _ in range(8)]
    for b in blocks[::2]:
        m.free(b)
    segs = memory_snapshot(m)
    assert len(segs) == 1 and segs[0]["total_size"] == m.stats.reserved == 8 * GiB
    states = [b["state"] for b in segs[0]["blocks"]]
    assert states == ["inactive", "active_allocated"] * 4  # carved from the start; evens freed
    st = memory_stats(m)
    assert st["inactive_split_bytes.all.current"] == 4 * GiB and st["inactive_split.all.current"] == 4


def test_settings_at_run_time_are_logged_and_replayed():
    r = Replay(record=True, cap=3 * GiB)
    r.set_settings("max_split_size_mb:1024")
    r.alloc("x", 2 * GiB)
    r.free("x")
    r.alloc("keep", 100 * MiB)
    r.alloc("y", 2 * GiB)
    assert ("settings", "max_split_size_mb:1024") in r.log
    again = replay(r.log, cap=3 * GiB)
    assert again.oom is None and again.peak_reserved == r.finish().peak_reserved
    assert replay([e for e in r.log if e[0] != "settings"], cap=3 * GiB).oom is not None


def test_a_refused_setting_fails_the_first_allocation(monkeypatch):
    from lab.measure.backends.sim import new_allocator

    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:5")
    alloc = new_allocator(None)
    with pytest.raises(AllocatorSettingsError, match="too small"):
        alloc.alloc("x", 100)
