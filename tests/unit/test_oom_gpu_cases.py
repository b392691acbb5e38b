"""`memlab view`'s out-of-memory replay against the GPU (issue 40): snapshots recorded at the
failing allocation under a cap, each program rerun under the settings the replay tries
(bench/oom_replay_gpu.py records them; `--merge` writes tests/fixtures/oom_cases/).

For every case and setting: the replay's verdict ("would the request that failed have been
served?") equals the rerun's, and its peak reserved up to that request is within 3 % of the
GPU's. The explanation's state at the failure equals the allocator's own counters, read by the
lab's out-of-memory observer at that moment.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lab.snapshots import load_plain
from lab.snapshots.oom import explain_oom
from lab.snapshots.replay import replay_oom

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "oom_cases"
DIGEST = FIXTURES / "reruns.json"
RECORDED = json.loads(DIGEST.read_text()) if DIGEST.is_file() else {"recorded": {}, "reruns": []}
# lesson 23's baseline is kept with the lesson's recordings (the lesson screen opens it)
LESSON23 = FIXTURES.parents[2] / "assets" / "reference" / "allocator-tuning" / "baseline.profile.pkl.gz"
PATHS = {p.name[: -len(".pkl.gz")]: p for p in FIXTURES.glob("*.pkl.gz")}
if PATHS and LESSON23.is_file() and "lesson23" in RECORDED["recorded"]:
    PATHS["lesson23"] = LESSON23
CASES = sorted(PATHS)
needs_recording = pytest.mark.skipif(
    not CASES, reason="no GPU recording yet: python bench/oom_replay_gpu.py --out DIR on a GPU, "
                      "then --merge DIR/oom_cases.tar.gz")


def _snapshot(case: str) -> dict:
    with gzip.open(PATHS[case], "rb") as f:
        return load_plain(f)


@needs_recording
@pytest.mark.parametrize("case", CASES)
def test_the_replay_matches_every_rerun(case):
    snap = _snapshot(case)
    entries = snap["device_traces"][0]
    rows = [r for r in RECORDED["reruns"] if r["case"] == case]
    assert rows
    report = replay_oom(snap, 0, entries, settings=sorted({r["conf"] for r in rows}))
    assert not report.refused
    assert report.reproduces, "the model must fail where the GPU failed, under the recorded cap"
    trials = {t.conf: t for t in report.trials}
    for r in rows:
        t = trials[r["conf"]]
        assert t.served == r["gpu_served"], r["conf"]
        if r["gpu_served"]:
            assert r["same_request"], "the rerun's request at that place has another size"
            assert t.peak_reserved == pytest.approx(r["gpu_peak_reserved"], rel=0.03), r["conf"]


@needs_recording
@pytest.mark.parametrize("case", CASES)
def test_the_explanation_is_the_allocators_own_state(case):
    snap = _snapshot(case)
    at = snap["memlab"]["oom"]  # what the observer read from the allocator at the failure
    x = explain_oom(snap, 0, snap["device_traces"][0])
    assert x.at_failure and x.limit.exact and x.limit.lo == at["cap"]
    assert x.reserved == at["reserved"]
    assert x.allocated == pytest.approx(at["allocated"], rel=0.01)


# ---- the merge itself, on the H200's own runs of lesson 23 (no recording needed) -----------------
def _bench():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "bench" / "oom_replay_gpu.py"
    spec = importlib.util.spec_from_file_location("oom_replay_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _h200_runs() -> dict:
    path = Path(__file__).resolve().parents[1] / "fixtures" / "h200_allocator_settings_traces.json.gz"
    return {r["variant"]: r for r in json.load(gzip.open(path, "rt"))}


def _snapshot_of(run: dict, cap: int) -> dict:
    """A job's snapshot as the GPU wrote it: the run's trace (up to its out-of-memory), the one
    segment it left (100 MiB live at its start), the cap the observer read."""
    entries = []
    for k, (act, addr, size) in enumerate(run["events"]):
        e = {"action": act, "addr": addr, "size": size, "stream": 0, "time_us": k, "frames": []}
        entries.append(e)
        if act == "oom":
            break
    seg_addr = run["events"][0][1]
    blocks = [{"address": seg_addr, "size": 100 << 20, "requested_size": 100 << 20,
               "state": "active_allocated", "frames": []},
              {"address": seg_addr + (100 << 20), "size": (2 << 30) - (100 << 20),
               "requested_size": 0, "state": "inactive", "frames": []}]
    return {"segments": [{"device": 0, "address": seg_addr, "total_size": 2 << 30, "stream": 0,
                          "segment_type": "large", "segment_pool_id": (0, 0),
                          "is_expandable": False, "blocks": blocks}],
            "device_traces": [entries],
            "memlab": {"oom": {"cap": cap, "allocated": 100 << 20, "reserved": 2 << 30}}}


def test_the_merge_compares_a_rerun_with_the_replay_of_its_own_setting(tmp_path):
    import io
    import pickle
    import tarfile

    bench, runs = _bench(), _h200_runs()
    base, split = runs["baseline"], runs["max_split_size"]  # the GPU reran it: max_split_size_mb:200
    snap = _snapshot_of(base, base["cap"])
    rerun = bench.alloc_digest({"device_traces": [[{"action": a, "size": n}
                                                   for a, _, n in split["events"]]]})
    metas = {"lesson23": {"case": "lesson23", "conf": "", "record": True, "status": "oom"},
             "lesson23__max_split_size_mb-200": {"case": "lesson23", "conf": split["alloc_conf"],
                                                 "record": False, "status": "ok",
                                                 "allocs": rerun}}
    tar = tmp_path / "oom_cases.tar.gz"
    with tarfile.open(tar, "w:gz") as t:
        files = {f"{n}.json": json.dumps(m).encode() for n, m in metas.items()}
        files["lesson23.pkl.gz"] = gzip.compress(pickle.dumps(snap, protocol=5))
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    (row,) = bench.merge(tar, write=False)
    # the GPU served the 2 GiB request that failed, at 2 GiB + 100 MiB reserved: so does the replay
    assert row["conf"] == "max_split_size_mb:200" and row["gpu_served"] and row["same_request"]
    assert row["gpu_peak_reserved"] == split["real"]["reserved"]
    assert row["replay_served"] is True
    assert row["replay_peak_reserved"] == row["gpu_peak_reserved"]


def test_a_ring_buffers_trace_is_matched_to_the_rerun_from_its_end():
    bench = _bench()
    GiB, MiB = 1 << 30, 1 << 20
    rerun = {"sizes": [2 * GiB, 100 * MiB, 2 * GiB, 7 * MiB]}
    # the recorded trace lost its first request: the failing one is still the third of the program
    lost_start = [{"action": "alloc", "size": 100 * MiB}, {"action": "oom", "size": 2 * GiB}]
    assert bench._requests_before_oom(lost_start, rerun) == 2
    whole = [{"action": "alloc", "size": 2 * GiB}, *lost_start]
    assert bench._requests_before_oom(whole, rerun) == 2
    assert bench._requests_before_oom(whole, {"sizes": [GiB, GiB]}) is None
