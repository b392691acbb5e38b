"""On a CUDA GPU (run on the device machine: `pytest -m cuda tests/gpu`)."""

import pickle
import threading

import pytest
import torch
from torch import nn

from lab.course.curriculum import load_lesson
from lab.measure.tracker import TensorTracker
from lab.runner.client import SubprocessRunner
from lab.runner.protocol import RunRequest

from ..conftest import ROOT

pytestmark = pytest.mark.cuda
LESSON_01 = load_lesson(ROOT / "lessons" / "01-linear-baseline")


def test_tracker_sees_what_the_autograd_engine_allocates_on_its_own_threads():
    tr = TensorTracker(device_type="cuda")
    with tr:
        model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 512)).cuda()
        x = torch.randn(64, 512, device="cuda")
        tr.phase = "backward"
        model(x).square().mean().backward()
        torch.cuda.synchronize()
        tr.phase = ""
    trace = tr.close()
    main = threading.get_ident()
    assert any(t != main for t in tr.alloc_threads), "no allocation seen off the main thread"
    live = trace.live_at(len(trace.events) - 1)
    grads = trace.by_category(live)["gradients"]
    assert grads == sum(p.numel() * p.element_size() for p in model.parameters())


def test_lesson_01_seed_numbers_on_the_real_allocator(tmp_path):
    profile = tmp_path / "profile.pkl"
    res = SubprocessRunner().run(RunRequest.for_lesson(LESSON_01, "baseline", "cuda", "seed",
                                                       profile_path=str(profile)))
    assert res.status == "ok", res.error
    expected = {"weights": 2_000_200_000, "input": 200_000_000, "output": 1_000_000_000}
    for name, nbytes in expected.items():
        c = res.check(name)
        assert c.expected_bytes == nbytes
        assert c.tensor_bytes == nbytes  # the tracker's count on CUDA is exact
        assert abs(c.measured_bytes - nbytes) / nbytes < 0.01, (name, c.measured_bytes, c.note)
        if c.measured_bytes != nbytes:
            assert c.note, f"{name}: allocator and tensors differ but no reason is named"
    assert res.allocator is not None and res.allocator.peak_allocated_bytes >= res.peak.bytes
    assert res.allocator.timeline is not None and res.allocator.timeline.events > 0
    assert res.step_time_s is not None and res.step_time_s > 0
    snap = pickle.loads(profile.read_bytes())
    assert snap["device_traces"] and snap["segments"]


def test_virtual_gpu_gives_the_real_cuda_out_of_memory():
    res = SubprocessRunner().run(RunRequest.for_lesson(LESSON_01, "baseline", "cuda", "seed",
                                                       gpu_memory=3 * 10**9))
    assert res.status == "oom"
    assert "CUDA out of memory" in res.error and "Tried to allocate" in res.error
    assert "virtual GPU" not in res.error  # the real allocator's message, not the tracker's
    assert res.timeline.events > 0
