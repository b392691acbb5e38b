"""Every lesson's claims, measured: cpu mode at small scale and sim mode at seed scale.

Each variant runs in-process through `measure_variant` (the worker's code path without the
subprocess) once, cached for all the assertions about it. Timing passes are off: tests assert
bytes, never times (bench/lessons_cpu.py prints times). Tolerances come from the measurements
quoted in each lesson.md; the byte counts in cpu/sim are exact, so most checks are equalities.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import math

import pytest

from lab.curriculum import load_course
from lab.measure.formula import evaluate
from lab.measure.measure import measure_variant
from lab.runner.worker import load_experiment

GB = 1e9
COURSE = load_course()
LESSONS = {l.key: l for l in COURSE.lessons}
HAS_LIGHTNING = importlib.util.find_spec("pytorch_lightning") is not None

# Parameters changed for the test run only, and why.
OVERRIDES = {
    # the 1.5B layout: two steps show every effect (step 1 already has the optimizer state)
    ("03", "sim"): {"steps": 2},
    # the loss going down over 40 steps is tested without the tracker in test_workloads.py (slow)
    ("03", "cpu"): {"steps": 3},
}
# Variants whose memory in sim is the same code path as another variant's (they differ in time,
# which simulation does not have); they run in cpu mode only, to keep the suite under 4 minutes.
SIM_SKIP = {("12", "batch_medium"), ("12", "loader_workers"), ("12", "profiled"),
            ("08", "eval_detach"), ("15", "lightning")}
EXPECTED_OOM = {
    ("13", "sim"): {"baseline", "bf16"},
    ("13", "cpu"): {"baseline", "bf16", "checkpointing"},
}


@functools.lru_cache(maxsize=None)
def _module(key):
    return load_experiment(str(LESSONS[key].experiment_path))


def _warm_up():
    # Import transformers' model code once, then freeze the heap: the engine's gc.collect()
    # after every run then scans only the objects the run made (seconds saved per run).
    from lab.workloads.models import build_model

    build_model("tiny", "cpu")
    gc.collect()
    gc.freeze()


@functools.lru_cache(maxsize=None)
def measured(key: str, variant: str, mode: str):
    if not gc.get_freeze_count():
        _warm_up()
    lesson = LESSONS[key]
    scale = "seed" if mode == "sim" else "small"
    params = {**lesson.params(scale), **OVERRIDES.get((key, mode), {})}
    return measure_variant(getattr(_module(key), variant), lesson=lesson.id, variant=variant,
                           mode=mode, scale=scale, params=params, checks=list(lesson.checks),
                           timing=False)


def peak(key, variant, mode):
    return measured(key, variant, mode).peak.bytes


def cat_at_peak(key, variant, mode, category):
    return measured(key, variant, mode).peak.by_category.get(category, 0)


def phase(key, variant, mode, name):
    p = measured(key, variant, mode).phase(name)
    assert p is not None, f"{key}/{variant}/{mode}: no phase {name!r}"
    return p


def step_extra(key, variant, mode, name):
    """How far a phase rose above where it started: an operation's own temporaries."""
    p = phase(key, variant, mode, name)
    return p.peak_bytes - p.start_bytes


ALL_RUNS = [(key, v.name, mode) for key, lesson in sorted(LESSONS.items()) if key != "01"
            for v in lesson.variants for mode in ("cpu", "sim")
            if not (mode == "sim" and (key, v.name) in SIM_SKIP)]


@pytest.mark.slow
@pytest.mark.parametrize("key,variant,mode", ALL_RUNS, ids=["-".join(r) for r in ALL_RUNS])
def test_variant_runs_and_its_checks_hold(key, variant, mode):
    if key == "15" and variant == "lightning" and not HAS_LIGHTNING:
        res = measured(key, variant, mode)
        # without the optional extra the variant explains itself in one line, and nothing crashes
        assert res.status == "error" and "pip install 'memlab[lightning]'" in res.error
        return
    res = measured(key, variant, mode)
    if variant in EXPECTED_OOM.get((key, mode), ()):
        assert res.status == "oom", res.error
        assert "out of memory" in res.error.lower() and "Tried to allocate" in res.error
        return
    assert res.status == "ok", res.error
    for c in res.checks:
        if c.source.startswith("tracked peak"):
            assert c.measured_bytes == pytest.approx(c.expected_bytes, rel=1e-4), c
        else:  # deltas and categories are numel × itemsize: exact off CUDA
            assert c.measured_bytes == c.expected_bytes, c
    assert res.peak.bytes > 0 and res.timeline.events > 0


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(k for k in LESSONS if k != "01"))
def test_predict_the_peak_answers_match_the_simulation(key):
    lesson = LESSONS[key]
    for q in lesson.quiz:
        if q.kind != "predict_peak" or q.scale != "seed":
            continue
        answer = evaluate(q.answer_gb, lesson.params("seed")) * GB
        assert peak(key, q.variant, "sim") == pytest.approx(answer, rel=q.tolerance)


# ---- lesson by lesson: the effects each lesson.md claims ------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_02_peak_is_in_the_optimizer_step_and_naming_the_logits_costs_them(mode):
    p = LESSONS["02"].params("seed" if mode == "sim" else "small")
    logits = p["batch"] * p["d_out"] * 4
    assert measured("02", "baseline", mode).peak.phase == "step 0"
    assert peak("02", "baseline", mode) - peak("02", "one_expression", mode) == logits
    # at the peak: weights, gradients, AdamW state (2x) and the foreach sqrt temporary (1x)
    w = (p["d_in"] * p["d_out"] + p["d_out"]) * 4
    assert cat_at_peak("02", "baseline", mode, "optimizer_state") == 2 * w + 8
    assert cat_at_peak("02", "baseline", mode, "gradients") == w
    if mode == "sim":
        assert peak("02", "baseline", "sim") == pytest.approx(11.20e9, rel=1e-3)


@pytest.mark.slow
def test_03_peak_moves_from_backward_to_the_step_when_the_batch_shrinks():
    for mode in ("sim", "cpu"):
        assert measured("03", "baseline", mode).peak.phase.startswith("backward"), mode
        assert measured("03", "small_batch", mode).peak.phase.startswith("step"), mode
    # seed: the three-term estimate is exact for the small batch and 4.98 GB (two logit-sized
    # temporaries at the start of backward) short for the big one
    big, small = measured("03", "baseline", "sim"), measured("03", "small_batch", "sim")
    assert small.peak.bytes == pytest.approx(small.metrics["estimate_bytes"], rel=1e-5)
    gap = big.peak.bytes - big.metrics["estimate_bytes"]
    logits = 16 * 256 * 151936 * 4
    assert gap == pytest.approx(2 * logits, rel=0.01)
    assert big.peak.bytes == pytest.approx(49.68e9, rel=1e-3)
    assert small.peak.bytes == pytest.approx(30.87e9, rel=1e-3)
    # activations scale with the batch (16 -> 4), parameters do not
    assert big.metrics["saved_activation_bytes"] / small.metrics["saved_activation_bytes"] \
        == pytest.approx(4, rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_04_no_grad_and_inference_mode_drop_the_activations(mode):
    base, ng, im = (peak("04", v, mode) for v in ("baseline", "no_grad", "inference_mode"))
    # nothing of the forward pass is kept (a few bytes: the previous batch's scalar loss)
    assert cat_at_peak("04", "no_grad", mode, "activations") <= 64
    assert cat_at_peak("04", "inference_mode", mode, "activations") <= 64
    assert base > 4 * ng
    # the same memory: the tracker splits composite ops (cross_entropy) under inference_mode too
    assert ng == im


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_05_autocast_shrinks_activations_not_weights_or_state(mode):
    fp32, bf16, fp16 = (measured("05", v, mode) for v in ("baseline", "bf16", "fp16"))
    assert bf16.peak.bytes == fp16.peak.bytes < fp32.peak.bytes
    for cat in ("parameters", "optimizer_state"):
        assert bf16.peak.by_category.get(cat) == fp32.peak.by_category.get(cat)
    if mode == "sim":
        ratio = bf16.peak.by_category["activations"] / fp32.peak.by_category["activations"]
        assert ratio == pytest.approx(0.63, abs=0.02)  # "down by 37%, not 50%"
        assert fp32.peak.bytes == pytest.approx(15.35e9, rel=1e-3)
        assert bf16.peak.bytes == pytest.approx(11.46e9, rel=1e-3)
    else:
        assert bf16.peak.bytes / fp32.peak.bytes == pytest.approx(26.2 / 40.1, rel=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_06_checkpointing_by_hand_and_by_transformers_save_the_same(mode):
    base, blocks, hf = (peak("06", v, mode) for v in
                        ("baseline", "checkpoint_blocks", "hf_gradient_checkpointing"))
    assert blocks == hf
    if mode == "sim":
        assert blocks / base == pytest.approx(6.79 / 15.35, rel=0.01)  # "fell by 56%"
        # what is left at the top is the LM head's temporaries, unchanged
        assert cat_at_peak("06", "checkpoint_blocks", "sim", "temporaries") == \
            cat_at_peak("06", "baseline", "sim", "temporaries")
    else:
        assert blocks / base == pytest.approx(26.2 / 40.1, rel=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_07_accumulation_cuts_activations_and_keeps_the_gradients(mode):
    base, acc = measured("07", "baseline", mode), measured("07", "accumulate", mode)
    assert acc.peak.bytes < base.peak.bytes / 2
    if mode == "sim":
        assert acc.peak.bytes == pytest.approx(5.46e9, rel=1e-3)
    else:
        # the same gradients, within float rounding
        assert acc.metrics["grad_norm"] == pytest.approx(base.metrics["grad_norm"], rel=1e-5)
        assert round(base.metrics["grad_norm"], 6) == 4.894719  # quoted in lesson.md
        assert acc.metrics["grad_abs_sum"] == pytest.approx(base.metrics["grad_abs_sum"], rel=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_08_keeping_loss_tensors_costs_a_graph_each_in_eval_and_nothing_after_backward(mode):
    keep, item = peak("08", "baseline", mode), peak("08", "eval_item", mode)
    assert keep > item * 1.3
    # after backward: the same memory to a few bytes (a 4-byte scalar per kept loss)
    assert abs(peak("08", "train_keep_tensor", mode) - peak("08", "train_item", mode)) <= 16
    if mode == "sim":
        assert keep - item == pytest.approx(10.56e9, rel=0.01)  # one more graph


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_09_set_to_none_lowers_the_peak_by_the_gradients(mode):
    p = LESSONS["09"].params("seed" if mode == "sim" else "small")
    saved = peak("09", "baseline", mode) - peak("09", "set_to_none", mode)
    if mode == "sim":  # the peak is at the very start of backward: no gradient exists yet
        assert saved == p["param_count"] * 4
    else:  # the tiny model's peak comes a little later, when a few gradients exist already
        assert 0.8 * p["param_count"] * 4 < saved <= p["param_count"] * 4


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_10_tracked_bytes_are_the_same_in_every_variant_off_cuda(mode):
    peaks = {v: peak("10", v, mode) for v in ("baseline", "empty_cache", "expandable_segments")}
    assert len(set(peaks.values())) == 1
    assert any("CUDA-only" in n for n in measured("10", "empty_cache", mode).notes)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_11_optimizer_state_and_step_temporaries(mode):
    p = LESSONS["11"].params("seed" if mode == "sim" else "small")
    P = p["param_count"] * 4
    assert step_extra("11", "baseline", mode, "step 1") == P  # foreach: sqrt of all exp_avg_sq
    assert step_extra("11", "adamw_fused", mode, "step 1") == 0
    assert 0 < step_extra("11", "adamw_for_loop", mode, "step 1") < P
    assert peak("11", "baseline", mode) - peak("11", "sgd_momentum", mode) == P + 4 * p["param_tensors"]
    assert peak("11", "sgd_momentum", mode) - peak("11", "sgd", mode) == P


@pytest.mark.slow
def test_12_memory_grows_with_the_batch():
    sim = [peak("12", v, "sim") for v in ("baseline", "batch_large")]
    assert sim[0] == pytest.approx(3.23e9, rel=3e-3) and sim[1] == pytest.approx(29.20e9, rel=3e-3)
    cpu = [peak("12", v, "cpu") for v in ("baseline", "batch_medium", "batch_large")]
    assert cpu[0] < cpu[1] < cpu[2]
    # loading data in workers changes host memory, not the device's
    assert peak("12", "loader_workers", "cpu") == pytest.approx(peak("12", "data_bound", "cpu"),
                                                                rel=1e-3)
    assert any("torch.profiler" in n for n in measured("12", "profiled", "cpu").notes)
    assert measured("12", "batch_large", "cpu").metrics["tokens_per_step"] == 16 * 64


@pytest.mark.slow
def test_13_which_techniques_fit_the_virtual_gpu():
    fits = {v.name: measured("13", v.name, "sim").status == "ok" for v in LESSONS["13"].variants}
    assert fits == {"baseline": False, "bf16": False, "checkpointing": True,
                    "micro_batches": True, "bf16_checkpointing": True}
    cap = LESSONS["13"].params("seed")["gpu_memory"]
    assert all(peak("13", v, "sim") <= cap for v, ok in fits.items() if ok)
    err = measured("13", "baseline", "sim").error
    assert "GPU 0 has a total capacity of 16.00 GiB" in err


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["sim", "cpu"])
def test_14_a_cycle_holds_memory_until_gc(mode):
    p = LESSONS["14"].params("seed" if mode == "sim" else "small")
    step = (p["batch"] * p["d_out"] + p["batch"] * p["d_in"]) * 4
    w = (p["d_in"] * p["d_out"] + p["d_out"]) * 4
    # (+ the 4-byte result of the callback's .sum())
    assert peak("14", "baseline", mode) == pytest.approx(w + p["steps"] * step, abs=64)
    assert peak("14", "weak_reference", mode) == pytest.approx(w + step, abs=64)
    found = measured("14", "find_cycles", mode)
    assert found.metrics["tensors_in_cycles"] == p["steps"]
    assert sum("Step" in n for n in found.notes) == p["steps"]


@pytest.mark.slow
def test_15_lightning_matches_the_hand_written_loop():
    if not HAS_LIGHTNING:
        pytest.skip("PyTorch Lightning (optional extra) is not installed")
    by_hand, lit = peak("15", "baseline", "cpu"), peak("15", "lightning", "cpu")
    assert lit == pytest.approx(by_hand, rel=0.01)
    sim = measured("15", "baseline", "sim")
    assert sim.peak.bytes == pytest.approx(3.39e9, rel=1e-3)


# Every peak a lesson.md quotes, at the precision it is quoted (GB at seed scale in simulation,
# MB at small scale on the CPU). If a change moves one of them, the text must change with it.
QUOTED = [
    ("02", "baseline", "sim", 11.20e9), ("02", "one_expression", "sim", 10.20e9),
    ("03", "baseline", "sim", 49.68e9), ("03", "small_batch", "sim", 30.87e9),
    ("04", "baseline", "sim", 23.27e9), ("04", "no_grad", "sim", 3.79e9),
    ("04", "inference_mode", "sim", 3.79e9), ("04", "no_grad", "cpu", 12.9e6),
    ("04", "inference_mode", "cpu", 12.9e6),
    ("05", "baseline", "sim", 15.35e9), ("05", "bf16", "sim", 11.46e9),
    ("05", "fp16", "sim", 11.46e9), ("05", "baseline", "cpu", 40.1e6), ("05", "bf16", "cpu", 26.2e6),
    ("06", "checkpoint_blocks", "sim", 6.79e9), ("06", "hf_gradient_checkpointing", "sim", 6.79e9),
    ("06", "baseline", "cpu", 40.1e6), ("06", "checkpoint_blocks", "cpu", 26.2e6),
    ("07", "baseline", "sim", 15.35e9), ("07", "accumulate", "sim", 5.46e9),
    ("07", "baseline", "cpu", 42.0e6), ("07", "accumulate", "cpu", 17.9e6),
    ("08", "baseline", "sim", 33.83e9), ("08", "eval_item", "sim", 23.27e9),
    ("08", "train_keep_tensor", "sim", 15.35e9), ("08", "train_item", "sim", 15.35e9),
    ("08", "baseline", "cpu", 97.5e6), ("08", "eval_item", "cpu", 66.0e6),
    ("08", "train_keep_tensor", "cpu", 40.1e6),
    ("09", "baseline", "sim", 15.85e9), ("09", "set_to_none", "sim", 15.35e9),
    ("09", "baseline", "cpu", 41.7e6), ("09", "set_to_none", "cpu", 40.1e6),
    ("11", "baseline", "sim", 15.35e9), ("11", "sgd_momentum", "sim", 14.85e9),
    ("11", "sgd", "sim", 14.35e9), ("11", "baseline", "cpu", 40.1e6),
    ("11", "sgd_momentum", "cpu", 38.3e6), ("11", "sgd", "cpu", 36.4e6),
    ("12", "batch_medium", "cpu", None), ("12", "data_bound", "sim", 15.35e9),
    ("13", "checkpointing", "sim", 12.10e9), ("13", "micro_batches", "sim", 8.92e9),
    ("13", "bf16_checkpointing", "sim", 12.15e9),
    ("14", "baseline", "sim", 5.60e9), ("14", "weak_reference", "sim", 3.20e9),
    ("14", "baseline", "cpu", 56.0e6), ("14", "weak_reference", "cpu", 32.0e6),
    ("15", "baseline", "sim", 3.39e9), ("15", "baseline", "cpu", 10.63e6),
]


@pytest.mark.slow
@pytest.mark.parametrize("key,variant,mode,quoted", [q for q in QUOTED if q[3]],
                         ids=[f"{k}-{v}-{m}" for k, v, m, q in QUOTED if q])
def test_numbers_quoted_in_lesson_text_are_what_the_lab_measures(key, variant, mode, quoted):
    unit = 1e9 if mode == "sim" else 1e6
    digits = 2 if mode == "sim" or key == "15" else 1
    assert round(peak(key, variant, mode) / unit, digits) == pytest.approx(quoted / unit), \
        f"lessons/{key}: lesson.md quotes {quoted / unit} for {variant} ({mode})"
    shown = f"{quoted / unit:.{digits}f}"
    assert shown in LESSONS[key].markdown, f"lessons/{key}/lesson.md no longer quotes {shown}"
