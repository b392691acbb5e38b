"""An out-of-memory explained and replayed (lab.snapshots.oom, .replay, .layout, .extras;
lab.measure.sim.allocator.trace_replay), on snapshots built in the shape
`torch.cuda.memory._snapshot()` returns.

The real one: lesson 23's baseline as the H200 ran it (tests/fixtures/h200_allocator_settings_
traces.json.gz: a 2 GiB block cached, 100 MiB cut from it, 2 GiB asked again under a 3 GiB cap).
The same fixture holds the GPU's own runs of that program under max_split_size_mb:200 and
expandable_segments:True, so the counterfactual replay is checked against the GPU here.
"""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest

from lab.measure.sim.allocator.settings import parse_alloc_conf
from lab.measure.sim.allocator.trace_replay import StartSegment, replay_trace
from lab.snapshots import open_summary
from lab.snapshots.layout import layout_at
from lab.snapshots.oom import explain_oom
from lab.snapshots.replay import (cap_from_message, find_limit, recorded_settings, replay_oom,
                                  start_segments)

ROOT = Path(__file__).resolve().parents[2]
MiB, GiB = 1 << 20, 1 << 30
RUNS = {r["variant"]: r for r in json.load(gzip.open(
    ROOT / "tests" / "fixtures" / "h200_allocator_settings_traces.json.gz", "rt"))}
CAP = RUNS["baseline"]["cap"]  # 3 GiB


def _entries(events, device_free=137 * GiB, stream=0):
    out = []
    for k, (act, addr, size) in enumerate(events):
        e = {"action": act, "size": size, "stream": stream, "time_us": 1000 + k, "frames": []}
        e.update({"device_free": device_free} if act == "oom" else {"addr": addr})
        out.append(e)
    return out


def _segment(addr, total, blocks, stream=0, pool=(0, 0), expandable=False):
    """blocks: [(size, live)] from the segment's start."""
    out, pos = [], addr
    for size, live in blocks:
        out.append({"address": pos, "size": size, "requested_size": size if live else 0,
                    "state": "active_allocated" if live else "inactive", "frames": []})
        pos += size
    return {"device": 0, "address": addr, "total_size": total, "stream": stream,
            "segment_type": "large", "segment_pool_id": pool, "is_expandable": expandable,
            "blocks": out}


def lesson23(at_oom: bool = True, **meta) -> dict:
    """The H200's lesson-23 baseline: the trace up to its out-of-memory."""
    events = RUNS["baseline"]["events"]
    events = events[:5] if at_oom else events
    addr = events[0][1]
    live = [(100 * MiB, True), (2 * GiB - 100 * MiB, False)] if at_oom else [(2 * GiB, False)]
    snap = {"segments": [_segment(addr, 2 * GiB, live)], "device_traces": [_entries(events)],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0,
                                   "expandable_segments": False}}
    if meta:
        snap["memlab"] = {"oom": meta}
    return snap


# ---- the counterfactual replay, against the GPU --------------------------------------------------
def test_the_failure_replayed_under_other_settings_matches_the_gpus_own_runs():
    # given the trace of the run that failed, and the cap (as the lab's observer records it)
    snap = lesson23(cap=CAP)
    r = replay_oom(snap, 0, snap["device_traces"][0])
    assert not r.refused and r.reproduces and r.limit.exact and r.limit.lo == CAP
    trials = {t.conf: t for t in r.trials}
    # then the settings the GPU ran the same program under fit, with the GPU's own peaks
    for variant in ("expandable_segments", "max_split_size"):
        gpu = RUNS[variant]
        conf = {"max_split_size": "max_split_size_mb:128"}.get(variant, gpu["alloc_conf"])
        assert trials[conf].served
        assert trials[conf].peak_reserved == gpu["real"]["reserved"]
    assert trials["expandable_segments:True"].retries == RUNS["expandable_segments"]["real"]["retries"]
    # garbage collection frees nothing here (no whole cached segment): it fails the same request
    gc = trials["garbage_collection_threshold:0.6"]
    assert gc.served is False and gc.failed_at == r.oom_index
    assert r.suggestion in ("expandable_segments:True", "max_split_size_mb:128")


def test_the_explanation_says_fragmentation_with_the_numbers():
    snap = lesson23(cap=CAP)
    x = explain_oom(snap, 0, snap["device_traces"][0])
    assert x.verdict == "fragmentation" and x.at_failure
    assert (x.request, x.allocated, x.reserved) == (2 * GiB, 100 * MiB, 2 * GiB)
    assert x.largest_free == x.holes == 2 * GiB - 100 * MiB
    assert x.limit.source.startswith("the cap memlab recorded")


def test_without_the_cap_the_trace_brackets_it_and_the_answer_says_so():
    snap = lesson23()
    entries = snap["device_traces"][0]
    r = replay_oom(snap, 0, entries)
    # at least the 2 GiB reserved it reached; less than 2 GiB reserved + the 2 GiB that failed
    assert (r.limit.lo, r.limit.hi) == (2 * GiB, 4 * GiB - 1) and not r.limit.exact
    t = next(t for t in r.trials if t.conf == "expandable_segments:True")
    assert t.served is None and 2 * GiB < t.fits_from <= 2 * GiB + 120 * MiB
    assert explain_oom(snap, 0, entries).verdict == "unclear"
    # the message gives it to two decimals: one answer again
    r = replay_oom(snap, 0, entries, message="… 3.00 GiB allowed; Of the allocated memory …")
    assert r.limit.lo <= CAP <= r.limit.hi and r.suggestion


def test_a_true_shortage_fits_under_no_setting():
    # 4 GiB live, 2 GiB more asked under a 5 GiB cap
    events = [("segment_alloc", (i + 1) << 40, GiB) for i in range(4)]
    events = [x for i, s in enumerate(events) for x in (s, ("alloc", s[1], GiB))]
    events.append(("oom", 0, 2 * GiB))
    segs = [_segment(e[1], GiB, [(GiB, True)]) for e in events if e[0] == "segment_alloc"]
    snap = {"segments": segs, "device_traces": [_entries(events)],
            "memlab": {"oom": {"cap": 5 * GiB}}}
    x = explain_oom(snap, 0, snap["device_traces"][0])
    assert x.verdict == "shortage"
    r = replay_oom(snap, 0, snap["device_traces"][0])
    assert r.reproduces and r.trials and all(t.served is False for t in r.trials)
    assert r.suggestion == ""


def test_the_gpus_own_free_memory_is_the_limit_without_a_fraction():
    snap = lesson23()
    oom = snap["device_traces"][0][4]
    oom["device_free"] = 512 * MiB  # less than the 2 GiB segment asked for: the GPU was full
    lim = find_limit(snap, snap["device_traces"][0], 4, 0)
    assert lim.kind == "device" and lim.lo == lim.hi == 2 * GiB + 512 * MiB
    assert cap_from_message("Tried to allocate 2.00 GiB. … 16.00 GiB allowed; Of …") == (
        int(15.995 * GiB), int(16.005 * GiB))
    assert cap_from_message("no cap in this message") is None


# ---- a truncated ring: the start rebuilt from the segments --------------------------------------
def _recorded(requests):
    """A trace as the GPU would write it, made by the allocator model itself: requests
    [("alloc", key, bytes) | ("free", key)], then the failing request. Returns (entries of the
    whole program, the segments at the failure), the model's addresses standing for the GPU's."""
    from lab.measure.sim.allocator.model import CachingAllocatorModel
    from lab.measure.sim.allocator.view import memory_snapshot

    m, live, out = CachingAllocatorModel(), {}, []
    for req in requests[:-1]:
        if req[0] == "alloc":
            before = m.stats.num_device_alloc
            b = live[req[1]] = m.malloc(req[2])
            if m.stats.num_device_alloc > before:  # a new segment, at the block's address
                out.append(("segment_alloc", b.addr, b.size if b.next is None else
                            b.size + b.next.size))
            out.append(("alloc", b.addr, req[2]))
        else:
            b = live.pop(req[1])
            out.append(("free_completed", b.addr, b.requested))
            m.free(b)
    out.append(("oom", 0, requests[-1][2]))
    return _entries(out), memory_snapshot(m)


# a big block cached, cut by two mid-sized ones, one of them freed: then a big request
RING_PROGRAM = [("alloc", "big", 1 * GiB), ("free", "big"), ("alloc", "a", 300 * MiB),
                ("alloc", "b", 300 * MiB), ("alloc", "c", 200 * MiB), ("free", "a"),
                ("alloc", "d", 100 * MiB), ("alloc", "e", 150 * MiB), ("alloc", "fail", GiB)]


def test_the_start_of_a_truncated_ring_is_rebuilt_from_the_segments():
    whole, segments = _recorded(RING_PROGRAM)
    drop = 4  # the ring kept the last entries only: "big" and "a" were made before it began
    cut = {"segments": segments, "device_traces": [whole[drop:]]}
    start = layout_at(cut, 0, -1)
    assert not start.problems and start.reserved == GiB and start.allocated == 300 * MiB
    # under the recorded settings, the replay from the rebuilt start is the replay of the whole
    # program: the state the dropped entries left is rebuilt exactly
    events = [(e["action"], e.get("addr", 0), e["size"]) for e in whole]
    for cap in (int(1.5 * GiB), int(1.9 * GiB), 3 * GiB):
        a = replay_trace(events, cap=cap)
        b = replay_trace(events[drop:], start=start_segments(start), cap=cap)
        assert (a.served, a.peak_reserved, a.retries) == (b.served, b.peak_reserved, b.retries), cap
        if not a.served:
            assert (a.failure.allocated, a.failure.reserved, a.failure.largest_free) == (
                b.failure.allocated, b.failure.reserved, b.failure.largest_free)
    # under other settings the dropped part keeps the layout the recorded settings gave it (an
    # approximation the report states): the whole program under expandable segments fits, the
    # ring's part cannot undo the holes made before it began
    s = parse_alloc_conf("expandable_segments:True")
    assert replay_trace(events, cap=int(1.9 * GiB), settings=s).served
    b = replay_trace(events[drop:], start=start_segments(start), cap=int(1.9 * GiB), settings=s)
    assert not b.served


def test_the_report_says_the_start_was_rebuilt():
    whole, segments = _recorded(RING_PROGRAM)
    snap = {"segments": segments, "device_traces": [whole[4:]],
            "memlab": {"oom": {"cap": int(1.9 * GiB)}}}
    r = replay_oom(snap, 0, snap["device_traces"][0])
    assert r.reproduces and any("made before its first entry" in n for n in r.notes)
    x = explain_oom(snap, 0, snap["device_traces"][0])
    assert any("before the trace's first entry" in b for b in x.blind)
    assert x.verdict == "fragmentation"


# ---- streams --------------------------------------------------------------------------------------
def test_a_block_cached_for_one_stream_does_not_serve_another():
    S = 7  # a side stream's id, as the trace writes it
    cap = int(1.5 * GiB)
    # the side stream's cached block is a whole free segment: freed, then the request served
    r = replay_trace([("alloc", 1, GiB, S), ("free_completed", 1, GiB, S), ("alloc", 2, GiB, 0)],
                     cap=cap)
    assert r.served and r.retries == 1
    same = replay_trace([("alloc", 1, GiB, 0), ("free_completed", 1, GiB, 0), ("alloc", 2, GiB, 0)],
                        cap=cap)
    assert same.served and same.retries == 0  # one stream: the cached block is reused
    # pinned by a live block of its own stream: nothing to free, and no reuse across streams
    pinned = [("alloc", 1, GiB, S), ("free_completed", 1, GiB, S), ("alloc", 3, 100 * MiB, S),
              ("alloc", 2, GiB, 0)]
    r = replay_trace(pinned, cap=cap)
    assert not r.served and r.failure.largest_free == 0  # stream 0 has no block at all


def test_a_record_stream_free_counts_until_free_completed():
    e = [{"action": a, "addr": 1, "size": GiB, "stream": 0, "time_us": t, "frames": []}
         for a, t in (("alloc", 1), ("free_requested", 2))]  # free_completed never came
    e.append({"action": "oom", "size": 4 * GiB, "stream": 0, "time_us": 3,
              "device_free": MiB, "frames": []})
    snap = {"segments": [_segment(1, GiB, [(GiB, True)])], "device_traces": [e]}
    x = explain_oom(snap, 0, e)
    assert x.allocated == GiB and any("another stream" in b for b in x.blind)


# ---- refused, with the reason --------------------------------------------------------------------
@pytest.mark.parametrize("change, says", [
    (lambda s: s["segments"][0].update(segment_pool_id=(1, 0)), "private memory pool"),
    (lambda s: s["allocator_settings"].update(PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync"),
     "cudaMallocAsync"),
])
def test_what_the_model_does_not_have_is_refused(change, says):
    snap = lesson23(cap=CAP)
    change(snap)
    r = replay_oom(snap, 0, snap["device_traces"][0])
    assert says in r.refused and not r.trials


def test_a_trace_that_begins_inside_expandable_segments_is_refused():
    snap = lesson23(cap=CAP)
    snap["segments"][0]["is_expandable"] = True
    snap["device_traces"][0] = snap["device_traces"][0][3:]  # the segment's map was dropped
    r = replay_oom(snap, 0, snap["device_traces"][0])
    assert "expandable" in r.refused


def test_recorded_settings_are_read_from_the_snapshot():
    s, notes = recorded_settings({"allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_non_split_rounding_mb:40",
        "max_split_size": 256 * MiB, "garbage_collection_threshold": 0.7,
        "expandable_segments": True, "roundup_power2_divisions": {"1": 4, "2": 0, "4": 2}}})
    assert s.expandable_segments and s.max_split_size == 256 * MiB
    assert s.max_non_split_rounding == 40 * MiB and s.garbage_collection_threshold == 0.7
    assert s.roundup_power2_divisions[:3] == (4, 0, 2) and not notes
    s, notes = recorded_settings({"allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "nonsense:1",
                                                         "max_split_size": -1}})
    assert notes and s.describe == ""


# ---- memlab view ------------------------------------------------------------------------------------
def test_view_explains_and_replays(tmp_path, capsys):
    from lab.cli import main

    p = tmp_path / "oom.pickle"
    p.write_bytes(pickle.dumps(lesson23(), protocol=5))  # protocol 5 reads too
    assert main(["view", str(p), "--json", "--no-timeline", "--cap", "3GiB"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["oom_explained"]["verdict"] == "fragmentation"
    assert d["oom_explained"]["free_reserved"] == 2 * GiB - 100 * MiB
    assert d["replay"]["reproduces"] and d["replay"]["suggestion"]
    assert main(["view", str(p), "--no-timeline", "--no-replay"]) == 0
    out = capsys.readouterr().out
    assert "verdict: UNCLEAR" in out and "would it have fit" not in out
    assert main(["view", str(p), "--cap", "lots"]) == 2
    assert "--cap" in capsys.readouterr().err
    # a setting of the user's own, replayed instead of the candidates (the H200 ran this one)
    assert main(["view", str(p), "--json", "--no-timeline", "--cap", "3GiB",
                 "--try", "max_split_size_mb:200"]) == 0
    [t] = json.loads(capsys.readouterr().out)["replay"]["trials"]
    assert t["conf"] == "max_split_size_mb:200" and t["served"]
    assert t["peak_reserved"] == RUNS["max_split_size"]["real"]["reserved"]
    assert main(["view", str(p), "--try", "max_split_size_mb:lots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--try" in err and "max_split_size_mb" in err


def test_the_summary_says_what_was_live_at_the_failure(tmp_path):
    p = tmp_path / "oom.pickle"
    p.write_bytes(pickle.dumps(lesson23(at_oom=False)))
    [s] = open_summary(p)
    assert s.at_oom is not None and s.at_oom.bytes == 100 * MiB and s.at_oom.count == 1
    assert s.peak_bytes == 2 * GiB  # the peak was earlier: the big tensor, before it was freed


# ---- a sim run's snapshot: the model's state at the failure ------------------------------------
def test_a_sim_runs_out_of_memory_snapshot_is_explained_like_the_gpus(tmp_path):
    import importlib.util

    from lab.course.curriculum import load_lesson
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    lesson = load_lesson(ROOT / "lessons" / "23-allocator-tuning")
    spec = importlib.util.spec_from_file_location("memlab_experiment_23", lesson.experiment_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "baseline.pkl"
    req = RunRequest.for_lesson(lesson, "baseline", "sim", "seed", profile_path=str(path),
                                timing=False)
    req.checks = []
    r = measure_request(req, module.baseline)
    assert r.status == "oom"
    [s] = open_summary(path)
    from lab.snapshots.oom import diagnose

    x, rep = diagnose(s)
    # the H200's numbers at its failure (the observer's): 100 MiB allocated, 2 GiB reserved
    assert x.verdict == "fragmentation" and x.at_failure and x.limit.lo == CAP
    assert (x.allocated, x.reserved, x.largest_free) == (100 * MiB, 2 * GiB, 2 * GiB - 100 * MiB)
    assert x.blind[0].startswith("a simulated run")
    assert rep.reproduces
    trials = {t.conf: t for t in rep.trials}
    assert trials["max_split_size_mb:128"].peak_reserved == RUNS["max_split_size"]["real"]["reserved"]
