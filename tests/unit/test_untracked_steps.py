"""Steps measured outside the tracker (`run.untracked()`, `run.compile`): torch.compile's lesson.

On a GPU a run whose steps ran untracked takes its numbers from the allocator
(lab.measure.allocator_view); in sim and on the CPU the tracker stays on and torch.compile is
not applied (each result says the numbers are the eager step's)."""

from __future__ import annotations

import torch

from lab.measure.allocator_view import NOTE, from_allocator
from lab.measure.result import AllocatorStats, DeviceInfo, Peak, PhaseStats, RunResult, Timeline
from lab.measure.session import Session
from lab.measure.trace import PhaseRecord
from lab.measure.tracker import TensorTracker


def test_untracked_is_a_no_op_where_the_tracker_measures():
    """cpu and sim have no allocator counters to fall back on: the tracker keeps measuring."""
    tracker = TensorTracker()
    run = Session.for_mode("cpu", tracker=tracker)
    with tracker:
        with run.untracked():
            x = torch.ones(1000)
        assert tracker.live_bytes >= x.numel() * x.element_size()
    tracker.close()
    assert run.used_untracked is False


def test_compile_is_the_eager_function_without_a_gpu_and_says_so():
    run = Session.for_mode("cpu")

    def f(x):
        return x * 2

    assert run.compiles is False
    assert run.compile(f, mode="reduce-overhead") is f
    assert any("torch.compile ran eagerly" in n for n in run.notes)


def _phase(name, start, end, peak):
    ps = PhaseStats(name=name, start_bytes=1, end_bytes=2, peak_bytes=3, delta_bytes=1)
    rec = PhaseRecord(name=name, setup=False, t_start=0.0, start_index=0, start_bytes=1,
                      cuda={"start_allocated": start, "end_allocated": end,
                            "peak_allocated": peak, "reserved": peak, "peak_reserved": peak})
    return ps, rec


def test_a_run_with_untracked_steps_takes_the_allocators_numbers():
    phases, records = zip(_phase("model", 0, 500, 500), _phase("forward 0", 500, 900, 1_400),
                          _phase("backward 0", 900, 700, 1_200))
    timeline = Timeline(index=[0, 1, 2], live=[0, 500, 900], events=40,
                        phase_starts=[("model", 0), ("forward 0", 10), ("backward 0", 25)])
    result = RunResult(lesson="torch-compile", variant="compiled", mode="cuda", scale="seed",
                       device=DeviceInfo("GPU", "cuda", 80, None), params={})
    result.phases = list(phases)
    result.peak = Peak(bytes=600, phase="model")  # what the tracker saw: the model only
    result.allocator = AllocatorStats(peak_allocated_bytes=1_400, peak_reserved_bytes=2_048,
                                      untracked_peak_bytes=800, timeline=timeline)
    result.notes = ["The CUDA allocator's peak is 800 B above the tracked tensors' peak: ..."]

    from_allocator(result, list(records))

    fwd = result.phases[1]
    assert (fwd.start_bytes, fwd.end_bytes, fwd.peak_bytes, fwd.delta_bytes) == (500, 900, 1_400, 400)
    assert (fwd.start_index, fwd.end_index) == (10, 25)
    assert result.phases[2].end_index == 40  # the last phase runs to the history's end
    assert (result.peak.bytes, result.peak.phase) == (1_400, "forward 0")
    assert result.timeline is timeline and result.allocator.untracked_peak_bytes == 0
    assert result.notes == [NOTE]


def test_a_snapshot_names_the_line_that_called_a_compiled_graph():
    """Inductor's generated wrapper (its cache folder) is not the user's code: the block is
    grouped under the line that called the compiled model, marked as compiled."""
    from lab.snapshots.frames import INDUCTOR_MARK, where

    frames = [{"filename": "/tmp/torchinductor_ana/x7/cx7abc.py", "line": 412, "name": "call"},
              {"filename": "/usr/lib/python3.12/site-packages/torch/_inductor/output_code.py",
               "line": 600, "name": "__call__"},
              {"filename": "/home/ana/train.py", "line": 31, "name": "main"}]
    assert where(frames) == "ana/train.py:31 main" + INDUCTOR_MARK
    assert INDUCTOR_MARK not in where(frames[2:])
    assert where(frames[:2]) == "Inductor's generated code:412 call"  # no user frame at all
