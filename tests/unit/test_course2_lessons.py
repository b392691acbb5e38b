"""Lessons 16-18 (issue 12): what each one promises, measured.

Quick tests: the lab's hand-over of an experiment's own snapshot, the saved-tensor hook's
bookkeeping, and the issue's bar for the shipped H200 snapshot (skipped while it is pending).
Slow tests run the lessons at small scale in cpu mode (and lesson 05 in sim) through
`measure_request` (the worker's path), in-process.
"""

from __future__ import annotations

import functools
import gc
import json
import weakref

import pytest
import torch

from lab.course.curriculum import load_course
from lab.measure.backends import backend_for
from lab.measure.measure import VariantSpec, measure
from lab.course.reference import REFERENCE_DIR, load_reference
from lab.runner.protocol import RunRequest
from lab.runner.worker import load_experiment, measure_request
from lab.snapshots import open_summary

from .test_lesson_effects import SCALE
from .test_lesson_effects import measured as lesson_run

COURSE = load_course()
LESSONS = {f"{l.number:02d}": l for l in COURSE.lessons}  # by folder number, as written here


@functools.lru_cache(maxsize=None)
def _module(key):
    return load_experiment(str(LESSONS[key].experiment_path))


@functools.lru_cache(maxsize=None)
def measured(key: str, variant: str, mode: str = "cpu", scale: str = "small"):
    lesson = LESSONS[key]
    if SCALE.get(mode) == scale:  # the run test_lesson_effects makes: once per session, shared
        return lesson_run(lesson.key, variant, mode)  # its keys are the course's (teaching order)
    return measure_request(RunRequest.for_lesson(lesson, variant, mode, scale, timing=False),
                           getattr(_module(key), variant))


# ---- the lab: an experiment that records the allocator history itself ------------------------
@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_a_kept_snapshot_is_what_snapshot_saves(tmp_path):
    # Given an experiment that makes its own snapshot and hands it over (lesson 04's way),
    # when the lab is asked for a profile, then the file is the experiment's, not the tracker's
    mine = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 1024,
                                                "time_us": 5, "frames": []}]]}

    def fn(run):
        with run.phase("model"):
            torch.ones(256)
        run.keep_snapshot(mine)

    out = tmp_path / "p.pkl"
    res = measure(fn,
                  VariantSpec("t", "v", "small", {"memory_history": "experiment"},
                              profile_path=str(out), timing=False),
                  backend_for("cpu"))
    assert res.status == "ok" and res.profile_path == str(out)
    s = open_summary(out)[0]
    assert s.events == 1 and s.peak_bytes == 1024


@pytest.mark.slow  # the quick tier's 2 minutes: over 2 CPU-s
def test_without_a_kept_snapshot_the_tracker_snapshot_is_saved(tmp_path):
    out = tmp_path / "p.pkl"
    res = measure(lambda run: torch.ones(256),
                  VariantSpec("t", "v", "small", {}, profile_path=str(out), timing=False),
                  backend_for("cpu"))
    assert res.status == "ok" and open_summary(out)[0].peak_bytes == 1024


def test_gzipped_snapshots_open(tmp_path):
    import gzip
    import pickle

    snap = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512,
                                                "time_us": 1, "frames": []}]]}
    path = tmp_path / "baseline.profile.pkl.gz"
    with gzip.open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    assert open_summary(path)[0].peak_bytes == 512


# ---- lesson 04: the shipped H200 snapshot (issue 12's bar) -----------------------------------
SNAPSHOT_LESSON = "reading-snapshots"
SHIPPED = sorted((REFERENCE_DIR / SNAPSHOT_LESSON).glob("*.profile.pkl.gz"))


@pytest.mark.skipif(not SHIPPED, reason=f"pending: no H200 snapshot in assets/reference/"
                    f"{SNAPSHOT_LESSON}/ yet (lesson 04 is waiting for its recording)")
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_snapshot_opens_and_its_peak_is_max_memory_allocated(path, capsys):
    # Given the H200 snapshot of a variant whose ring held the whole run, when `memlab view
    # --json` opens it, then its peak is the recording's max_memory_allocated within 1 %
    from lab.cli import main

    variant = path.name.split(".")[0]
    recording = load_reference(SNAPSHOT_LESSON).get(variant)
    assert recording is not None, f"{path.name} has no recording {variant}.json beside it"
    assert main(["view", str(path), "--json", "--no-timeline"]) == 0
    summary = json.loads(capsys.readouterr().out)
    if recording.metrics.get("ring_full"):
        pytest.skip(f"{variant}: the ring dropped the run's start (that is the variant's lesson)")
    expected = recording.allocator.peak_allocated_bytes
    assert summary["peak"]["bytes"] == pytest.approx(expected, rel=0.01)


@pytest.mark.slow
def test_16_the_small_ring_drops_the_start_and_the_snapshot_opens(tmp_path):
    full, ring = measured("04", "baseline"), measured("04", "small_ring")
    assert full.status == ring.status == "ok"
    assert full.metrics["untraced_live_bytes"] == 0 and full.metrics["ring_full"] == 0
    assert full.metrics["orphan_free_bytes"] == 0
    assert ring.metrics["ring_full"] == 1
    assert ring.metrics["trace_entries"] == LESSONS["04"].params("small")["small_max_entries"]
    # dumped while the loop's memory is alive: the weights and AdamW's state are allocated at
    # the dump, in both snapshots, and the small ring has lost their alloc entries
    weights_and_state = 3 * 4 * LESSONS["04"].params("small")["param_count"]
    assert full.metrics["live_bytes_at_dump"] == ring.metrics["live_bytes_at_dump"] >= weights_and_state
    assert ring.metrics["untraced_live_bytes"] >= weights_and_state
    assert ring.metrics["orphan_free_bytes"] > 0  # frees whose allocs the ring dropped


# ---- lesson 06: the chunked loss -----------------------------------------------------------
@pytest.mark.slow
def test_17_chunked_loss_is_the_same_loss_at_a_lower_peak():
    base, chunked, no_remat = (measured("06", v) for v in ("baseline", "chunked", "chunked_no_remat"))
    assert base.status == chunked.status == no_remat.status == "ok"
    assert chunked.metrics["loss"] == pytest.approx(base.metrics["loss"], rel=1e-4)
    assert no_remat.metrics["loss"] == pytest.approx(base.metrics["loss"], rel=1e-4)
    assert chunked.peak.bytes < no_remat.peak.bytes < base.peak.bytes


@pytest.mark.slow
def test_17_fused_says_it_needs_cuda():
    res = measured("06", "fused")
    assert res.status == "error" and "cuda only" in res.error


# ---- lesson 05: the saved-tensor hook and the formula ------------------------------------------
def test_05_pack_hook_keeps_nothing_alive_and_backward_still_works():
    # Given the lesson's hook, when a forward saves its own output and backward never runs,
    # then dropping the output frees it at once (no reference cycle for gc to find)
    SavedPerLayer = _module("05").SavedPerLayer
    model = torch.nn.Sequential(torch.nn.Linear(8, 8))
    hook = SavedPerLayer.__new__(SavedPerLayer)
    hook.params = {p.untyped_storage()._cdata for p in model.parameters()}
    hook.seen, hook.where, hook.bytes = set(), "layer 0", {}
    x = torch.randn(4, 8, requires_grad=True)
    gc.disable()
    try:
        with hook:
            y = model(x).exp()  # exp saves its output
        ref = weakref.ref(y)
        del y
        assert ref() is None, "the pack hook's packed value keeps the output alive"
    finally:
        gc.enable()
    # and the trap it avoids is real: returning `t` itself keeps the output alive, gc or not
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = model(x).exp()
    ref = weakref.ref(y)
    del y
    gc.collect()
    assert ref() is not None
    assert hook.bytes["layer 0"] == 2 * 4 * 8 * 4  # the Linear's input x and exp's output
    # and gradients are unchanged by the hook
    with hook:
        g1 = torch.autograd.grad(model(x).exp().sum(), x)[0]
    g2 = torch.autograd.grad(model(x).exp().sum(), x)[0]
    assert torch.equal(g1, g2)


ACTIVATION_VARIANTS = [v.name for v in LESSONS["05"].variants]


@pytest.mark.slow
@pytest.mark.parametrize("variant", ACTIVATION_VARIANTS)
def test_05_the_formula_predicts_the_saved_bytes_in_cpu_mode(variant):
    res = measured("05", variant)
    assert res.status == "ok", res.error
    assert res.checks, "every variant has its formula check"
    p = LESSONS["05"].params("small")
    for c in res.checks:  # the CPU kernels save what the formula counts, but for LayerNorm's dtype
        assert c.measured_bytes == c.expected_bytes - bf16_norm_stats_saving(variant, p), c


SEQ_PARAM = {"baseline": "seq", "short": "short_seq", "long": "long_seq",
             "longest": "longest_seq", "math": "seq", "math_longest": "longest_seq", "gpt2": "seq"}


def bf16_norm_stats_saving(variant: str, p: dict) -> int:
    """What the CPU's LayerNorm saves less than CUDA's: on a bf16 input the CPU kernel keeps
    mean and rstd in bf16 (2 + 2 B a token), CUDA's in fp32 (4 + 4 B), the formula's count.
    Sim takes the CPU kernel's dtype here today. GPT-2 has two LayerNorms a layer; Qwen2's
    RMSNorm computes its rsqrt in fp32 in Python on every device."""
    if variant != "gpt2":
        return 0
    return p["gpt2_layers"] * p["batch"] * p[SEQ_PARAM[variant]] * 2 * 4


def sim_mask_extra(variant: str, p: dict) -> int:
    """What sim saves beyond the formula today: under FakeTensorMode transformers cannot prove
    the causal mask unnecessary, so it builds a (B, 1, T, T) mask and passes it to SDPA, which
    saves it (2 B per element as the CPU kernel keeps it) and, with a mask, repeats k and v to
    every head instead of using enable_gqa. CUDA (real tensors) does neither."""
    s = p[SEQ_PARAM[variant]]
    if variant == "gpt2":
        return p["gpt2_layers"] * p["batch"] * 2 * s * s
    h_kv = p["kv_heads"] * p["hidden"] // p["heads"]
    return p["layers"] * p["batch"] * (2 * s * s + 4 * (p["hidden"] - h_kv) * s)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ACTIVATION_VARIANTS)
def test_05_sim_is_the_formula_plus_its_known_mask_detour(variant):
    res = measured("05", variant, "sim", "small")
    assert res.status == "ok", res.error
    p = LESSONS["05"].params("small")
    for c in res.checks:
        if variant.startswith("math"):  # the math path adds a mask in place: nothing extra saved
            assert c.measured_bytes == c.expected_bytes, c
        else:  # exact once sim takes CUDA's attention path; until then, the detour and no more
            exact = c.expected_bytes - bf16_norm_stats_saving(variant, p)
            assert c.measured_bytes in (exact, exact + sim_mask_extra(variant, p)), c


ACTIVATION_RECORDED = sorted(load_reference("activation-memory").items())


@pytest.mark.skipif(not ACTIVATION_RECORDED, reason="pending: lesson 05 has no H200 recording yet")
@pytest.mark.parametrize("variant,recording", ACTIVATION_RECORDED, ids=[v for v, _ in ACTIVATION_RECORDED])
def test_05_the_formula_is_within_10_percent_of_the_h200(variant, recording):
    # issue 12's bar: the derived formula predicts the measured bytes at every length shown
    assert recording.checks, f"{variant}: the recording has no formula check"
    for c in recording.checks:
        assert c.measured_bytes == pytest.approx(c.expected_bytes, rel=0.10), c
