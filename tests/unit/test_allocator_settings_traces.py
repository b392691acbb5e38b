"""The allocator model against H200 traces of lesson 23's PYTORCH_CUDA_ALLOC_CONF settings
(max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions, expandable_segments),
recorded by bench/allocator_settings_traces.py --fixture. Given the GPU's segment addresses the
model must match the GPU to the byte: peak allocated and reserved, out-of-memory, retries and
segments freed.

The run's peaks are its H200 recording's (assets/reference/allocator-tuning: the max over the
lab's phases), not the trace file's `memory_stats()` peaks: the lab resets the peak counters at
every phase start, so those are the last phase's; the counters of retries, OOMs and segments
freed are never reset."""

import gzip
import json
from pathlib import Path

import pytest

from lab.measure.sim.allocator.replay import replay_cuda_trace
from lab.measure.sim.allocator.settings import parse_alloc_conf
from lab.course.reference import REFERENCE_DIR

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "h200_allocator_settings_traces.json.gz"
RUNS = json.load(gzip.open(FIXTURE, "rt")) if FIXTURE.is_file() else []


@pytest.mark.skipif(not RUNS, reason="no H200 traces yet: bash bench/h200_new_lessons.sh records them")
@pytest.mark.parametrize("run", RUNS, ids=[r["variant"] for r in RUNS])
def test_the_model_replays_each_setting_to_the_byte(run):
    got = replay_cuda_trace([tuple(e) for e in run["events"]], cap=run["cap"],
                            settings=parse_alloc_conf(run["alloc_conf"]))
    recorded = json.loads((REFERENCE_DIR / "allocator-tuning" / f"{run['variant']}.json")
                          .read_text(encoding="utf-8"))["allocator"]
    want = {**{k: run["real"][k] for k in ("oom", "retries", "segments_freed")},
            "allocated": recorded["peak_allocated_bytes"], "reserved": recorded["peak_reserved_bytes"]}
    assert {k: got[k] for k in want} == want
