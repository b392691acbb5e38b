"""Lessons 02-15 at seed scale on a real CUDA GPU (the H200 reference machine).

Skipped without CUDA. Each variant runs in its own worker process (a fresh CUDA context and a
clean caching allocator), with the timed pass on, exactly as `memlab run` does. Select lessons
with -k, e.g. `pytest -m cuda tests/gpu/test_lessons_cuda.py -k "05 or 06" -s`; -s prints, per
variant, the allocator's peak, the tracked peak, the sim-vs-CUDA gap and the step time.

What is asserted is what each lesson.md claims in words (directions and equalities of bytes),
not the exact CUDA numbers: those are recorded, not predicted. The lesson texts' H200 sections
are filled from the recorded runs.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest
import torch

from lab.curriculum import load_course
from lab.measure.result import RunResult
from lab.runner.client import SubprocessRunner
from lab.runner.protocol import RunRequest

pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

LESSONS = {l.key: l for l in load_course().lessons}
MB = 1e6


@functools.lru_cache(maxsize=None)
def run(key: str, variant: str):
    lesson = LESSONS[key]
    saved = os.environ.get("MEMLAB_CUDA_RESULTS")  # a `memlab run --all --save DIR` of this tree
    if saved and (Path(saved) / lesson.id / f"{variant}.json").is_file():
        # check the runs just recorded instead of running the whole course twice
        res = RunResult.from_dict(json.loads((Path(saved) / lesson.id / f"{variant}.json").read_text()))
    else:
        req = RunRequest(lesson_path=str(lesson.path), variant=variant, mode="cuda", scale="seed",
                         timeout_s=lesson.timeout_s)
        res = SubprocessRunner().run(req)
    alloc = res.allocator
    print(f"\n[{key} {variant}] {res.status} tracked peak {res.peak.bytes / 1e9:.3f} GB in "
          f"{res.peak.phase!r}; allocator peak "
          f"{(alloc.peak_allocated_bytes / 1e9) if alloc else float('nan'):.3f} GB, reserved "
          f"{(alloc.peak_reserved_bytes / 1e9) if alloc else float('nan'):.3f} GB; "
          f"step {res.step_time_s}; metrics {res.metrics}; error {res.error}")
    return res


def ok(key, variant):
    res = run(key, variant)
    assert res.status == "ok", f"{key}/{variant}: {res.error}"
    return res


def tracked(key, variant):
    return ok(key, variant).peak.bytes


def allocated(key, variant):
    return ok(key, variant).allocator.peak_allocated_bytes


@pytest.mark.parametrize("key", sorted(k for k in LESSONS if k != "01"))
def test_checks_match_numel_times_itemsize(key):
    # Given each variant's checks, the tracker's bytes equal the formula exactly (categories),
    # and the allocator's delta is within 1% or 64 MB of it (512 B rounding, cuBLAS workspace).
    for v in LESSONS[key].variants:
        if key == "15" and v.name == "lightning":
            continue  # covered below: needs the optional extra
        res = run(key, v.name)
        if key == "13" and res.status == "oom":
            continue
        assert res.status == "ok", f"{key}/{v.name}: {res.error}"
        for c in res.checks:
            tol = max(abs(c.expected_bytes) * 0.01, 64 * MB)  # + the cuBLAS workspace
            if c.source.startswith("tracked") and "optimizer_state" in c.source:
                # AdamW's step counters stay on the CPU on CUDA (foreach / for-loop)
                assert c.expected_bytes - 4 * 400 <= c.measured_bytes <= c.expected_bytes, c
            else:
                assert abs(c.measured_bytes - c.expected_bytes) <= tol, c


def test_02_peak_is_in_the_step_and_the_named_logits_cost_1gb():
    assert run("02", "baseline").peak.phase == "step 0"
    assert tracked("02", "baseline") - tracked("02", "one_expression") == pytest.approx(1e9, rel=0.01)


def test_03_peak_moves_to_the_optimizer_step_with_the_small_batch():
    assert run("03", "baseline").peak.phase.startswith("backward")
    assert run("03", "small_batch").peak.phase.startswith("step")
    small = ok("03", "small_batch")
    assert small.peak.bytes == pytest.approx(small.metrics["estimate_bytes"], rel=0.01)


def test_04_no_grad_and_inference_mode():
    assert allocated("04", "baseline") > 4 * allocated("04", "no_grad")
    assert allocated("04", "inference_mode") == pytest.approx(allocated("04", "no_grad"), rel=0.1)
    assert tracked("04", "inference_mode") == tracked("04", "no_grad")


def test_05_autocast_shrinks_the_peak_not_the_state():
    fp32, bf16, fp16 = (ok("05", v) for v in ("baseline", "bf16", "fp16"))
    assert bf16.allocator.peak_allocated_bytes < fp32.allocator.peak_allocated_bytes
    assert fp16.allocator.peak_allocated_bytes < fp32.allocator.peak_allocated_bytes
    for r in (bf16, fp16):
        assert r.peak.by_category.get("optimizer_state") == fp32.peak.by_category.get("optimizer_state")
    assert bf16.step_time_s < fp32.step_time_s  # tensor cores (H200)


def test_06_checkpointing_saves_memory_and_costs_time():
    assert tracked("06", "checkpoint_blocks") == tracked("06", "hf_gradient_checkpointing")
    assert allocated("06", "checkpoint_blocks") < 0.6 * allocated("06", "baseline")
    assert ok("06", "checkpoint_blocks").step_time_s > ok("06", "baseline").step_time_s


def test_07_accumulated_gradients_equal_full_batch_gradients():
    base, acc = ok("07", "baseline"), ok("07", "accumulate")
    assert acc.allocator.peak_allocated_bytes < 0.5 * base.allocator.peak_allocated_bytes
    # TF32 may be off or on; either way a few parts in 10^4 at most
    assert acc.metrics["grad_norm"] == pytest.approx(base.metrics["grad_norm"], rel=1e-3)


def test_08_kept_loss_tensors_cost_a_graph_in_eval_only():
    assert tracked("08", "baseline") > 1.3 * tracked("08", "eval_item")
    assert abs(tracked("08", "train_keep_tensor") - tracked("08", "train_item")) < MB


def test_09_set_to_none_lowers_the_peak():
    saved = allocated("09", "baseline") - allocated("09", "set_to_none")
    assert 0 < saved <= 124_439_808 * 4 + 8 * MB


def test_10_allocated_reserved_nvml():
    base, empty = ok("10", "baseline"), ok("10", "empty_cache")
    m, e = base.metrics, empty.metrics
    assert m["reserved_free"] >= m["allocated_free"] + 4 * 2**30 - 8 * MB  # the cache kept them
    assert e["reserved_empty_cache"] < m["reserved_free"]  # empty_cache gave them back
    assert e["allocated_empty_cache"] == m["allocated_free"]  # and freed no tensor
    if "nvml_used_free" in m:
        assert m["nvml_used_free"] > m["reserved_free"]  # + the CUDA context
    ok("10", "expandable_segments")


def test_11_optimizer_state_and_step_temporaries():
    step = {v: ok("11", v).phase("step 1") for v in
            ("baseline", "adamw_fused", "adamw_for_loop", "sgd", "sgd_momentum")}
    extra = {v: p.peak_bytes - p.start_bytes for v, p in step.items()}
    assert extra["adamw_fused"] < extra["adamw_for_loop"] < extra["baseline"]


def test_12_throughput_and_data_loading():
    tps = [ok("12", v).metrics["tokens_per_s"] for v in ("baseline", "batch_medium", "batch_large")]
    assert tps[0] < tps[1] <= tps[2] * 1.05
    slow, fixed = ok("12", "data_bound"), ok("12", "loader_workers")
    assert fixed.metrics["tokens_per_s"] > 1.5 * slow.metrics["tokens_per_s"]
    if "gpu_busy_percent" in slow.metrics:  # needs NVML (nvidia-ml-py)
        assert fixed.metrics["gpu_busy_percent"] > slow.metrics["gpu_busy_percent"]
    assert any("torch.profiler" in n for n in ok("12", "profiled").notes)


def test_13_virtual_16gib_gpu():
    base = run("13", "baseline")
    assert base.status == "oom" and "Tried to allocate" in base.error
    for v in ("checkpointing", "micro_batches"):
        ok("13", v)
    # bf16 and bf16_checkpointing: recorded, not asserted (CUDA's autocast lists differ from sim)
    run("13", "bf16"), run("13", "bf16_checkpointing")


def test_14_cycles_hold_memory_until_gc():
    assert tracked("14", "baseline") - tracked("14", "weak_reference") == pytest.approx(2.4e9, rel=0.01)
    assert ok("14", "find_cycles").metrics["tensors_in_cycles"] == 3


def test_15_lightning_matches_by_hand():
    pytest.importorskip("pytorch_lightning")
    assert allocated("15", "lightning") == pytest.approx(allocated("15", "baseline"), rel=0.05)
