"""sim's estimated compiled peak, client side (lab/profile/compiled_estimate.py): when the pass
runs (the gate), and how the result says both numbers. The pass itself: the slow test below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.measure.result import AllocatorStats, DeviceInfo, RunResult
from lab.profile import compiled, compiled_estimate

ROOT = Path(__file__).resolve().parents[2]
CHAIN = ROOT / "tests" / "fixtures" / "profile" / "compiled_chain.py"


def _result(alloc: int, *, status="ok", metrics=None, notes=()) -> RunResult:
    r = RunResult(lesson="profile", variant="train.py", mode="sim", scale="",
                  device=DeviceInfo("NVIDIA H200", "cuda", 150 * 10**9), status=status)
    r.allocator = AllocatorStats(peak_allocated_bytes=alloc, peak_reserved_bytes=alloc + 2**20,
                                 predicted=True)
    r.metrics.update(metrics or {})
    r.notes += [compiled.SITES_NOTE + "train.py:331", *notes]
    return r


@pytest.fixture
def no_gate(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled_estimate, "GATE", tmp_path / "compiled_estimate.json")
    monkeypatch.delenv(compiled_estimate.ENV, raising=False)
    return compiled_estimate.GATE


def test_without_a_gate_that_passed_nothing_is_shown(no_gate, monkeypatch):
    assert not compiled_estimate.enabled()
    assert not compiled_estimate.wants_estimate(_result(10))
    no_gate.write_text(json.dumps({"shipped": False}))
    assert not compiled_estimate.enabled()
    no_gate.write_text(json.dumps({"shipped": True}))
    assert compiled_estimate.wants_estimate(_result(10))
    assert not compiled_estimate.wants_estimate(_result(10, status="error"))
    monkeypatch.setenv(compiled_estimate.ENV, "0")
    assert not compiled_estimate.enabled()


def test_the_developer_switch_runs_it_and_says_the_error_is_not_measured(no_gate, monkeypatch):
    monkeypatch.setenv(compiled_estimate.ENV, "1")
    eager = _result(13_870_000_000)
    assert compiled_estimate.wants_estimate(eager)
    est = _result(10_240_000_000, metrics={"compiled_dynamo_graphs": 3.0,
                                           "compiled_saved_bytes": 2e9,
                                           "compiled_fused_bytes": 5e9},
                  notes=[compiled_estimate.SKIPPED + 'mode="reduce-overhead"'])
    compiled_estimate.add(eager, est)
    first = eager.notes[0]
    assert first.startswith("torch.compile (train.py:331): sim predicts the eager version, max "
                            "allocated 13.87 GB")
    assert "estimated compiled peak: max allocated 10.24 GB" in first
    assert "its error is not measured yet" in first
    assert "2 graph breaks" in eager.notes[1] and "3.63 GB less at the peak" in eager.notes[1]
    assert eager.notes[2].endswith('mode="reduce-overhead"')
    assert eager.metrics["estimated_compiled_peak_allocated_bytes"] == 10_240_000_000
    assert eager.allocator.peak_allocated_bytes == 13_870_000_000  # the eager result stays


def test_a_gate_that_passed_is_quoted(no_gate):
    no_gate.write_text(json.dumps({"shipped": True, "cases": 8, "gpu": "NVIDIA H100 80GB HBM3",
                                   "held_out_worst": -0.061, "mean_abs": 0.04,
                                   "eager_held_out_worst": 0.35}))
    eager = _result(100)
    compiled_estimate.add(eager, _result(90))
    assert ("against 8 compiled runs recorded on NVIDIA H100 80GB HBM3: held-out worst -6.1 %"
            in eager.notes[0])


def test_a_failed_estimate_leaves_the_eager_prediction_alone(no_gate):
    eager = _result(100)
    est = _result(0, status="error")
    est.error = "AssertionError: boom\nmore"
    compiled_estimate.add(eager, est)
    assert "estimated_compiled_peak_allocated_bytes" not in eager.metrics
    assert eager.notes[-1].startswith("sim's compiled estimate did not finish (error: "
                                      "AssertionError: boom)")


def test_the_workers_skip_note_is_the_one_the_client_reads():
    from lab.measure.sim.compiled.stats import SKIPPED_NOTE

    assert SKIPPED_NOTE == compiled_estimate.SKIPPED


@pytest.mark.slow  # two sim passes of a script, one of them through Dynamo and AOTAutograd (~25 s)
def test_sim_estimates_the_compiled_chain_below_its_eager_prediction(monkeypatch):
    # Given a script whose loss is a compiled chain of pointwise ops over a 4 MB weight
    from tests.unit.test_profile_compiled import InProcessRunner

    from lab.profile.run import parse_command, run_profile

    monkeypatch.setenv(compiled_estimate.ENV, "1")
    runner = InProcessRunner()
    r = run_profile(parse_command(["python", str(CHAIN), "cuda", "4"]), runner, "sim",
                    timeout_s=300, steps=1)
    # then sim ran it twice (eager, then the estimate pass) and says both
    assert r.status == "ok", r.error
    assert len(runner.requests) == 2
    assert runner.requests[1].params[compiled.COMPILED_PASS] is True
    m = r.metrics
    assert m["compiled_dynamo_graphs"] == 1 and m["compiled_backward_graphs"] == 1
    # eager keeps the chain's intermediates for backward (sin, cos, their product, exp, tanh:
    # 4 MB each); Inductor's partitioner saves only the weight and recomputes the chain
    eager = r.allocator.peak_allocated_bytes
    est = m["estimated_compiled_peak_allocated_bytes"]
    assert est < eager - 3 * 4 * 2**20
    assert est >= 2 * 4 * 2**20  # the weight and its gradient are still there
    assert r.notes[0].startswith("torch.compile (compiled_chain.py:")
