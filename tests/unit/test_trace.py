"""The trace model: timeline, peak, downsampling that keeps peaks, JSON round trip."""

import json
import random

from lab.measure.result_parts import build_blocks, build_peak, build_timeline
from lab.measure.result import SCHEMA, DeviceInfo, RunResult
from lab.measure.trace import ALLOC, FREE, Event, Trace, pick_indices


def sawtooth_trace(n_teeth=400, seed=0) -> tuple[Trace, int]:
    """Alloc/free pairs of random sizes; one tooth is much taller than the others."""
    rng = random.Random(seed)
    trace, sid, tall = Trace(), 0, rng.randrange(n_teeth)
    for i in range(n_teeth):
        size = 10_000_000 if i == tall else rng.randrange(1, 1000)
        trace.events.append(Event(ALLOC, sid, size, i, "phase A" if i < n_teeth // 2 else "phase B"))
        trace.events.append(Event(FREE, sid, size, i + 0.5, "phase B"))
        trace.categories[sid] = "activations"
        sid += 1
    return trace, 10_000_000


def test_the_peak_survives_any_downsampling():
    trace, tall = sawtooth_trace()
    for points in (8, 50, 200, 10_000):
        tl = build_timeline(trace, max_points=points)
        assert max(tl.live) == tall
        assert len(tl.index) <= max(points + 2, 2)
        assert tl.index == sorted(tl.index)
        assert max(tl.by_category["activations"]) == tall


def test_downsampling_keeps_min_and_max_of_each_bucket():
    ys = [0, 5, 1, 9, 2, 2, 8, 0] * 100
    keep = pick_indices(ys, 38)
    dy = [ys[i] for i in keep]
    assert max(dy) == 9 and min(dy) == 0 and len(dy) <= 40 and keep == sorted(keep)


def test_peak_reports_what_was_live_by_category():
    t = Trace(events=[
        Event(ALLOC, 0, 100, 0, "model"), Event(ALLOC, 1, 50, 1, "fwd"), Event(ALLOC, 2, 30, 2, "fwd"),
        Event(FREE, 2, 30, 3, "fwd"), Event(FREE, 1, 50, 4, "bwd"),
    ], categories={0: "parameters", 1: "activations", 2: "temporaries"})
    peak = build_peak(t)
    assert (peak.bytes, peak.phase, peak.index) == (180, "fwd", 2)
    assert peak.by_category == {"parameters": 100, "activations": 50, "temporaries": 30}
    assert [b.nbytes for b in peak.top] == [100, 50, 30]
    blocks = build_blocks(t)
    assert [(b.nbytes, b.alloc_index, b.free_index) for b in blocks] == [(100, 0, None), (50, 1, 4), (30, 2, 3)]


def test_run_result_round_trips_through_json():
    trace, _ = sawtooth_trace(50)
    r = RunResult(lesson="x", variant="baseline", mode="sim", scale="seed",
                  device=DeviceInfo("simulated", "sim"), timeline=build_timeline(trace),
                  peak=build_peak(trace), blocks=build_blocks(trace), metrics={"loss": 1.5})
    d = json.loads(json.dumps(r.to_dict()))
    assert d["schema"] == SCHEMA and list(d)[0] == "schema"
    back = RunResult.from_dict(d)
    assert back == r


def test_a_result_from_another_schema_is_refused():
    d = RunResult(lesson="x", variant="v", mode="cpu", scale="small",
                  device=DeviceInfo("CPU", "cpu")).to_dict()
    d["schema"] = 99
    try:
        RunResult.from_dict(d)
    except ValueError as e:
        assert "schema 99" in str(e)
    else:
        raise AssertionError("schema 99 accepted")
