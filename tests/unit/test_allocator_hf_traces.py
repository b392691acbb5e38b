"""The allocator model against the caching allocator's own traces of the plain Hugging Face loop.

tests/fixtures/h200_hf_traces.jsonl.gz: bench/h200_hf_traces.py on an H200 (torch 2.11), no lab
code in the loop - the cases where sim's max reserved differed from the H200 (qwen2.5-0.5b fp32,
gemma-2b bf16 + ckpt) and llama-3.2-1b bf16 + ckpt at batches 10-12 under a 40 GiB cap, where
batch 12 runs out of memory although 13 fits (the H200's ground truth). Replayed request by
request with the GPU's segment addresses, the model's max allocated, max reserved, OOM and
release-and-retry count equal the GPU's: a difference between sim and the H200 is in the
requests sim makes, not in the allocator model.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lab.measure.sim.allocator.replay import replay_cuda_trace

TRACES = Path(__file__).parents[1] / "fixtures" / "h200_hf_traces.jsonl.gz"
RUNS = [json.loads(line) for line in gzip.open(TRACES, "rt")]
GiB = 2**30


def replay_trace(run: dict) -> tuple[int, int, bool, int]:
    names = run["actions"]
    cap = int(run["cap_gib"] * GiB) if run["cap_gib"] else None
    got = replay_cuda_trace(((names[a], addr, size) for a, addr, size, _stream in run["trace"]),
                            cap=cap)
    return got["allocated"], got["reserved"], got["oom"], got["retries"]


def test_the_fixture_holds_the_cases_it_names():
    cases = {(r["model"], r["combo"], r["batch"], r["cap_gib"]) for r in RUNS}
    assert ("llama-3.2-1b", "bf16+ckpt", 12, 40) in cases and len(cases) == len(RUNS) == 8
    assert [r["status"] for r in RUNS if r["model"] == "llama-3.2-1b"] == ["ok", "ok", "oom"]


@pytest.mark.parametrize("run", RUNS, ids=[f"{r['model']}-{r['combo']}-b{r['batch']}-cap{r['cap_gib']}"
                                          for r in RUNS])
def test_a_plain_hf_loop_trace_replays_to_the_byte(run):
    real = (run["max_allocated"], run["max_reserved"], run["status"] == "oom", run["retries"])
    assert replay_trace(run) == real


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r['model']}-{r['combo']}-b{r['batch']}")
def test_without_the_gpus_addresses_descending_segments_give_its_max_reserved(run):
    """Sim has no GPU addresses: its segments take descending ones, as cudaMalloc mostly hands
    them out. Best fit breaks ties by address, so this decides which of two equal free blocks is
    reused; ascending addresses missed two of these traces (llama b11 by 0.44 %)."""
    names = run["actions"]
    events = [(names[a], addr, size) for a, addr, size, _stream in run["trace"]]
    cap = int(run["cap_gib"] * GiB) if run["cap_gib"] else None
    real = replay_cuda_trace(events, cap=cap)
    synthetic = replay_cuda_trace(events, cap=cap, real_addresses=False)
    assert (synthetic["reserved"], synthetic["oom"]) == (real["reserved"], real["oom"])
    assert real["reserved"] == run["max_reserved"]
