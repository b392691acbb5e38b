"""The lessons on disk pass `memlab dev check`, and what the check cannot see holds too.

The rules themselves (files, headings, variants, scales, checks, quiz, claims against the H200
recordings, typed numbers, answers shown before the run, recordings, the cited H200 block,
optional extras) live in lab/dev/check.py and are tested on a tampered copy of lesson 01 in
test_dev_check.py. Here they run over every lesson folder, one test per lesson, so
`pytest -k 05-mixed` checks one lesson while it is being written.
"""

from __future__ import annotations

import gc
import importlib.util
import weakref
from pathlib import Path

import pytest
import torch

from lab.course.curriculum import Course, load_course, predicted_answer_gb
from lab.dev.check import check
from lab.course.reference import REFERENCE_DIR, load_reference

COURSE = load_course()
LESSONS = COURSE.lessons
BY_ID = {l.id: l for l in LESSONS}


def _one(lesson) -> Course:
    return Course(COURSE.title, COURSE.intro, lessons=[lesson])


def test_the_course_loads_without_errors():
    assert [str(e) for e in COURSE.errors] == []
    assert LESSONS, "no lesson folders found"


def test_lesson_numbers_are_unique():
    # ids are checked by load_course; two folders "03-a" and "03-b" would load both
    numbers = [l.number for l in LESSONS]
    assert len(set(numbers)) == len(numbers)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.slug)
def test_lesson_passes_dev_check(lesson):
    # warnings (recordings pending re-recording) are allowed; problems are not
    problems = [str(p) for p in check(_one(lesson)) if not p.warning]
    assert problems == []


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.slug)
def test_predict_the_peak_has_an_answer(lesson):
    # dev check skips a question whose answer cannot be computed; the app cannot
    for q in lesson.quiz:
        if q.kind == "predict_peak":
            assert predicted_answer_gb(lesson, q) > 0


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda l: l.slug)
def test_recordings_are_real_runs_on_a_validated_card(lesson):
    # dev check matches lesson/variant/mode/scale; the app also relies on these. A lesson is
    # recorded on whichever card the device gave: an H200 or an H100, whose memory equals the
    # H200's to the byte (lab/measure/sim/gpus.py); the screen names the recording's card
    from lab.measure.sim.gpus import GPUS

    validated = {g.device_name for g in GPUS.values() if g.validated}
    for variant, res in load_reference(lesson.id).items():
        assert res.device.name in validated, (variant, res.device.name)
        assert res.allocator is not None, variant  # the real allocator's numbers, not only ours
        assert res.status in ("ok", "oom", "error"), variant
        assert res.peak.bytes > 0, variant


def test_seed_scale_uses_the_seed_workloads():
    # the seed documents' sizes: the blog's Qwen2 loop (16 and 2 × 256 tokens), GPT-2 small on
    # 1,024-token sequences, whose small scale is the tiny byte-level model
    p = BY_ID["training-cycle"].params("seed")
    assert (p["layout"], p["batch"], p["seed_small_batch"], p["seq"]) == ("qwen2-1.5b", 16, 2, 256)
    for lesson in LESSONS:
        seed, small = lesson.params("seed"), lesson.params("small")
        if seed.get("layout") == "gpt2-124m":
            assert seed["seq"] == 1024, lesson.slug
            assert small["layout"] == "tiny", lesson.slug  # seconds on a laptop CPU


# ---- lesson content the check cannot see ---------------------------------------------------------
def _experiment(lesson_id: str):
    path = BY_ID[lesson_id].experiment_path
    spec = importlib.util.spec_from_file_location(f"lesson_{lesson_id.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_03_saved_tensor_hook_leaves_no_reference_cycle():
    # Given lesson 03's hook counting saved tensors, when a forward pass saves its own output
    # (sigmoid does) and the graph is dropped without backward, then gc frees the output. A pack
    # hook returning `t` itself keeps it: output -> grad_fn -> saved slot -> output, through C++.
    SavedBytes = _experiment("training-cycle").SavedBytes
    model = torch.nn.Linear(64, 64)
    with SavedBytes(model) as saved:
        y = model(torch.randn(8, 64)).sigmoid()
        loss = y.sum()
    assert saved.total >= y.untyped_storage().nbytes()  # it counted the saved output
    ref = weakref.ref(y.untyped_storage())
    del y, loss
    gc.collect()
    assert ref() is None


def test_03_saved_tensor_hook_keeps_the_gradients_exact():
    SavedBytes = _experiment("training-cycle").SavedBytes
    torch.manual_seed(0)
    model, x = torch.nn.Linear(16, 16), torch.randn(4, 16)
    model(x).sigmoid().exp().sum().backward()
    plain = model.weight.grad.clone()
    model.zero_grad(set_to_none=True)
    with SavedBytes(model):
        loss = model(x).sigmoid().exp().sum()
    loss.backward()
    assert torch.equal(model.weight.grad, plain)


@pytest.mark.slow
def test_07_baseline_is_the_same_step_as_05_baseline():
    # Lesson 10 once kept step 0's gradients alive through zero_grad(set_to_none=True) (a list
    # made for comparing them), so its baseline peaked one gradient set above lesson 08's, which
    # runs the same training step. Given both baselines on a real CPU, their peaks are equal.
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    peaks = []
    for lesson_id in ("mixed-precision", "gradient-accumulation"):
        lesson = BY_ID[lesson_id]
        res = measure_request(RunRequest.for_lesson(lesson, "baseline", "cpu", "small",
                                                    timing=False), _experiment(lesson_id).baseline)
        assert res.status == "ok", res.error
        peaks.append(res.peak.bytes)
    assert peaks[0] == peaks[1]


def test_reference_folders_are_lessons():
    # a recording folder nobody owns (a renamed lesson) would ship and never be checked
    ids = {l.id for l in LESSONS}
    stray = sorted(p.name for p in Path(REFERENCE_DIR).iterdir() if p.is_dir() and p.name not in ids)
    assert stray == []
