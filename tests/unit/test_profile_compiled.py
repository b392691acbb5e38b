"""Scripts that call torch.compile (lab/profile/compiled.py), on the CPU: the detection, what the
tracked pass runs, and the wording of a result that has the eager version only, or both.

The compiled run itself needs a GPU: tests/gpu/test_profile_compiled_cuda.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from lab.measure.result import AllocatorStats, DeviceInfo, RunResult
from lab.profile import compiled
from lab.profile.run import parse_command, run_profile

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "tests" / "fixtures" / "profile" / "compiled_chain.py"


def _line(path: Path, marker: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if marker in t)


def test_watch_records_the_caller_and_hands_back_the_eager_model():
    original = torch.compile
    model = nn.Linear(4, 4)
    with compiled.CompileWatch() as w:
        same = torch.compile(model, mode="max-autotune")  # SITE_A

        @torch.compile(fullgraph=True)  # the decorator-factory form
        def f(x):
            return x * 2

        torch.compile(model, disable=True)  # not a compile: not recorded
    assert torch.compile is original  # put back
    assert same is model and f(torch.ones(1)).item() == 2.0
    here = Path(__file__).name
    assert w.sites == [f"{here}:{_line(Path(__file__), 'SITE_A')}",
                       f"{here}:{_line(Path(__file__), 'decorator-factory')}"]


def test_module_compile_is_seen_at_the_scripts_line_and_watch_restores_on_error():
    original = torch.compile
    with pytest.raises(ValueError), compiled.CompileWatch() as w:
        nn.Linear(2, 2).compile()  # SITE_B: nn.Module.compile calls torch.compile for us
        raise ValueError("the script failed")
    assert torch.compile is original
    assert w.sites == [f"{Path(__file__).name}:{_line(Path(__file__), 'SITE_B')}"]


def test_the_compiled_pass_calls_the_real_compile(monkeypatch):
    calls = []
    monkeypatch.setattr(torch, "compile", lambda m=None, **kw: calls.append(kw) or "compiled")
    with compiled.CompileWatch(real=True) as w:
        assert torch.compile(nn.Linear(2, 2), mode="reduce-overhead") == "compiled"
    assert calls == [{"mode": "reduce-overhead"}] and len(w.sites) == 1


class InProcessRunner:
    """The worker's path (lab/profile/script.py measured for the request), in this process;
    every request it was given is kept."""

    def __init__(self):
        self.requests = []

    def run(self, req, on_event=None, cancel=None):
        from lab.runner.worker import measure_request

        self.requests.append(req)
        return measure_request(req)


@pytest.mark.slow  # a tracked run of the script (~3 s on 2 cores)
def test_cpu_profile_of_a_compiled_script_says_eager_first():
    # Given a script that compiles its loss function, profiled on the CPU
    runner = InProcessRunner()
    r = run_profile(parse_command(["python", str(CHAIN), "cpu", "1"]), runner, "cpu",
                    timeout_s=120)
    # then it ran once, eagerly (no compiled pass off a GPU), and its first line says so
    assert r.status == "ok", r.error
    assert len(runner.requests) == 1
    site = f"compiled_chain.py:{_line(CHAIN, 'COMPILE_LINE')}"
    assert r.notes[0].startswith(f"torch.compile ({site}) ran eagerly under the tracker")
    assert "--mode cuda also measures the compiled run" in r.notes[0]
    assert r.metrics["torch_compile_calls"] == 1
    # eager really ran: the chain's intermediates were tracked in backward (the sum's input,
    # the tanh, exp and product outputs: at least three 1 MB tensors beside the weight)
    assert r.peak.bytes >= 4 * 2**20
    from lab.profile.text import render

    assert render(r).splitlines()[0] == r.notes[0]


def _result(mode: str, alloc: int | None, reserved: int | None, *, predicted=False,
            status="ok") -> RunResult:
    r = RunResult(lesson="profile", variant="train.py", mode=mode, scale="",
                  device=DeviceInfo("NVIDIA H200", "cuda", 150 * 10**9), status=status)
    if alloc is not None:
        r.allocator = AllocatorStats(peak_allocated_bytes=alloc, peak_reserved_bytes=reserved,
                                     predicted=predicted)
    r.notes.append(compiled.SITES_NOTE + "train.py:331")
    return r


def test_sim_says_plainly_that_it_predicts_the_eager_version():
    r = _result("sim", 13_870_000_000, 16_020_000_000, predicted=True)
    compiled.say_eager(r)
    assert r.notes[0].startswith("torch.compile (train.py:331) ran eagerly: sim predicts the "
                                 "eager version, predicted max allocated 13.87 GB, reserved "
                                 "16.02 GB")
    assert "--mode cuda" in r.notes[0]


@pytest.mark.parametrize("mode, status, wanted", [
    ("cuda", "ok", True), ("cuda", "oom", True), ("cuda", "error", False), ("cpu", "ok", False),
    ("sim", "ok", False)])
def test_a_compiled_pass_only_on_a_gpu_after_an_eager_pass_that_got_far(mode, status, wanted):
    assert compiled.wants_compiled_pass(_result(mode, 1, 1, status=status)) is wanted
    no_call = _result(mode, 1, 1, status=status)
    no_call.notes.clear()
    assert compiled.wants_compiled_pass(no_call) is False


def test_a_failed_compiled_pass_leaves_the_eager_result_said_as_eager():
    eager = _result("cuda", 13_870_000_000, 16_020_000_000)
    failed = _result("cuda", None, None, status="error")
    failed.error = "BackendCompilerFailed: inductor raised"
    from lab.runner.protocol import RunRequest

    req = RunRequest("profile", "script", "cuda", kind="profile", params={"a": 1})
    asked = []
    r = compiled.measure_compiled(eager, req, lambda again: asked.append(again) or failed, None)
    assert r is eager
    assert r.notes[0] == ("torch.compile (train.py:331): only the eager version was measured, "
                          "max allocated 13.87 GB, reserved 16.02 GB; the compiled run failed: "
                          "BackendCompilerFailed: inductor raised")
    [again] = asked
    assert again.params == {"a": 1, compiled.COMPILED_PASS: True} and again.profile_path
    assert not Path(again.profile_path).exists()  # the temporary snapshot is removed


@pytest.mark.slow  # a tracked run of the script for its snapshot
def test_merge_takes_the_compiled_counters_and_the_snapshots_categories(tmp_path):
    # Given an eager pass and a compiled pass whose snapshot holds the chain's allocations
    # (the CPU tracker's trace written in PyTorch's snapshot format stands in for the GPU's)
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure
    from lab.profile import script as experiment

    snap = tmp_path / "compiled.pkl"
    params = {"target": str(CHAIN), "module": False, "args": ["cpu", "1"], "timeout_s": 0,
              "output_path": None}
    stand_in = measure(experiment.script, VariantSpec("profile", "script", "", params,
                                                      profile_path=str(snap), timing=False),
                       backend_for("cpu"))
    assert snap.exists()
    eager = _result("cuda", 13_870_000_000, 16_020_000_000)
    eager.peak.bytes, eager.peak.phase = 13_000_000_000, "backward 1"
    comp = _result("cuda", 10_240_000_000, 11_370_000_000)
    comp.notes = ["The CUDA allocator's peak is 10 B above the tracked tensors' peak: ..."]
    r = compiled.merge(eager, comp, str(snap))
    # then the first line names both versions with their numbers
    assert r.notes[0] == ("torch.compile (train.py:331): measured as compiled, max allocated "
                          "10.24 GB, reserved 11.37 GB (the allocator's own counters, no "
                          "tracker); its eager version under the tracker: max allocated 13.87 GB,"
                          " reserved 16.02 GB")
    assert not any(n.startswith("The CUDA allocator's peak is") for n in r.notes)
    assert r.metrics["eager_peak_allocated_bytes"] == 13_870_000_000
    # categories at the peak come from the snapshot (its peak is the stand-in run's)
    assert r.peak.bytes == stand_in.peak.bytes and r.peak.by_category
    assert sum(r.peak.by_category.values()) == r.peak.bytes
    assert r.phases == [] and any("guessed from the allocation stacks" in n for n in r.notes)


def test_a_gpu_result_whose_eager_run_failed_says_why_there_is_no_compiled_number():
    r = _result("cuda", 2_000_000_000, 3_000_000_000, status="error")
    compiled.say_eager(r)
    assert r.notes[0] == ("torch.compile (train.py:331): only the eager version was measured, "
                          "max allocated 2.00 GB, reserved 3.00 GB; the compiled run was not run "
                          "(the eager run ended error)")
