"""One auto-mode rule (lab.measure.modes) for the app and the CLI, decided without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lab.measure.modes import ModeError, choose


@pytest.mark.parametrize("requested, scale, gpu, mode, got_scale", [
    ("auto", None, "NVIDIA H200", "cuda", "seed"),
    ("auto", "small", "NVIDIA H200", "cuda", "small"),
    ("auto", None, None, "sim", "seed"),  # no GPU: full scale, comparable with the recordings
    ("auto", "seed", None, "sim", "seed"),
    ("auto", "small", None, "cpu", "small"),  # small asked: a real run, in seconds
    ("cpu", None, None, "cpu", "small"),
    ("cpu", "seed", None, "cpu", "seed"),
    ("sim", None, "NVIDIA H200", "sim", "seed"),
    ("cuda", None, True, "cuda", "seed"),
])
def test_the_rule(requested, scale, gpu, mode, got_scale):
    c = choose(requested, scale, gpu=gpu)
    assert (c.mode, c.scale) == (mode, got_scale)
    assert c.reason and "\n" not in c.line()


def test_the_reason_says_why():
    assert "no CUDA GPU" in choose("auto", None, gpu=None).reason
    assert "NVIDIA H200" in choose("auto", None, gpu="NVIDIA H200").reason
    assert choose("cpu", None, gpu=None).reason == "as asked"


def test_cpu_at_seed_scale_warns_that_it_takes_minutes():
    assert "minutes" in choose("cpu", "seed", gpu=None).warning
    assert choose("cpu", "small", gpu=None).warning == ""
    assert choose("auto", None, gpu=None).warning == ""


def test_cuda_without_a_gpu_and_unknown_modes_are_errors():
    with pytest.raises(ModeError, match="needs a CUDA GPU"):
        choose("cuda", None, gpu=None)
    with pytest.raises(ModeError, match="not one of"):
        choose("tpu", None, gpu=None)
    with pytest.raises(ModeError, match="runs in modes cuda"):
        choose("sim", None, gpu=None, lesson_modes=("cuda",))


def test_auto_falls_back_to_what_the_lesson_allows():
    c = choose("auto", None, gpu=None, lesson_modes=("cuda", "cpu"))
    assert c.mode == "cpu" and "does not run in that mode" in c.reason


def test_the_rule_needs_no_torch():
    code = "import sys, lab.measure.modes, lab.measure.device; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
