"""The playground: combinations, workloads, the compare plan and table, the fit search, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.measure.result import AllocatorStats, DeviceInfo, Peak, RunResult, Timeline
from lab.playground import (ComboError, ComparePlan, Comparison, Probe, Techniques, confirm,
                            get_workload, parse_combo, parse_combos, run_compare, search)
from lab.playground.compare import EXPERIMENT

ROOT = Path(__file__).resolve().parents[2]


# ---- combinations ------------------------------------------------------------------------------
@pytest.mark.parametrize("text, label", [
    ("", "baseline"), ("baseline", "baseline"), ("ckpt+bf16", "bf16+ckpt"),
    ("accum4+sgd+fused", "accum4+sgd+fused"), ("accum=2, fp16", "fp16+accum2"),
    ("zero_grads", "zero_grads"), ("no_grad+bf16", "eval+bf16"), ("adamw", "baseline"),
])
def test_combo_labels_are_canonical(text, label):
    assert parse_combo(text).label == label
    assert parse_combo(label) == parse_combo(text)  # the label parses back to the same thing


@pytest.mark.parametrize("text, expect", [
    ("bf16+fp16", "repeats"), ("warp-drive", "unknown technique"), ("eval+ckpt", "eval runs"),
    ("accum0", "1..1024"), ("sgd+adam", "repeats"),
])
def test_bad_combos_are_one_line(text, expect):
    with pytest.raises(ComboError, match=expect) as info:
        parse_combo(text)
    assert "\n" not in str(info.value)


def test_duplicate_combos_refused():
    with pytest.raises(ComboError, match="twice"):
        parse_combos(["bf16+ckpt", "ckpt+bf16"])


def test_workloads_and_support():
    assert get_workload("mlp").items_per_step({"batch": 4, "seq": 64}) == 256  # tokens
    assert get_workload("linear").items_per_step({"batch": 4}) == 4  # samples
    with pytest.raises(ComboError, match="does not support ckpt"):
        get_workload("linear").check(parse_combo("ckpt"))
    with pytest.raises(KeyError, match="no workload"):
        get_workload("gpt7")


def test_plan_points_every_combination_at_the_generic_experiment():
    combos = parse_combos(["baseline", "bf16+ckpt"])
    reqs = ComparePlan("mlp", {"batch": 2, "seq": 8}, combos, "sim", "small").requests()
    assert [r.variant for r in reqs] == ["combo", "combo"]
    assert all(r.experiment == EXPERIMENT and Path(r.experiment).is_file() for r in reqs)
    assert reqs[1].overrides["techniques"] == parse_combo("bf16+ckpt").to_dict()
    assert reqs[0].overrides["workload"] == "mlp" and not reqs[0].timing  # sim: nothing to time


# ---- compare, with an injected runner -----------------------------------------------------------
def _result(variant, peak, step=None, status="ok", allocator=None) -> RunResult:
    return RunResult(lesson="playground", variant=variant, mode="cpu", scale="small",
                     device=DeviceInfo("CPU", "cpu"), status=status, peak=Peak(bytes=peak, index=1),
                     timeline=Timeline(index=[0, 1, 2], t=[0, .1, .2], live=[0, peak, 0], events=3),
                     step_time_s=step, allocator=allocator,
                     error=None if status == "ok" else "CUDA out of memory. Tried to allocate")


class FakeRunner:
    """Replays peaks by combination (what a worker would have measured)."""

    def __init__(self, by_label):
        self.by_label, self.requests = by_label, []

    def run(self, req, on_event=None, cancel=None):
        self.requests.append(req)
        label = Techniques.from_dict(req.overrides["techniques"]).label
        if on_event:
            on_event({"type": "phase", "name": "forward 1", "live_bytes": 1})
        peak, step, status = self.by_label[label]
        return _result("combo", peak, step, status)


def test_run_compare_rows():
    runner = FakeRunner({"baseline": (1000, 0.5, "ok"), "bf16+ckpt": (600, 0.75, "ok"),
                         "accum2": (0, None, "oom")})
    plan = ComparePlan("mlp", {"batch": 4, "seq": 64, "steps": 2},
                       parse_combos(["baseline", "bf16+ckpt", "accum2"]), "cpu", "small")
    events = []
    c = run_compare(plan, runner, on_event=lambda label, msg: events.append(label))
    assert [r.combo for r in c.rows] == ["baseline", "bf16+ckpt", "accum2"]
    base, both, accum = c.rows
    assert base.delta_bytes is None and both.delta_bytes == -400 and both.delta_frac == -0.4
    assert both.throughput == pytest.approx(4 * 64 / 0.75) and c.unit == "tokens"
    assert accum.status == "oom" and accum.delta_bytes is None and accum.error
    assert [r.variant for r in c.results] == ["baseline", "bf16+ckpt", "accum2"]
    assert events == ["baseline", "bf16+ckpt", "accum2"]
    again = Comparison.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again.rows == c.rows and again.results[1].peak.bytes == 600


# ---- fit: the search, driven by formulas ---------------------------------------------------------
def affine(fixed, per_sample, error_at=None):
    calls = []

    def probe(batch):
        calls.append(batch)
        if error_at is not None and batch >= error_at:
            return Probe(batch, "error", 0, "boom")
        return Probe(batch, "ok", fixed + per_sample * batch)

    probe.calls = calls
    return probe


def test_fit_affine_needs_few_probes():
    p = affine(1000, 100)
    r = search(p, 5000, Techniques())
    assert r.status == "ok" and r.batch == 40 and r.peak_bytes == 5000 and r.margin_bytes == 0
    assert r.next_peak_bytes == 5100 and r.fixed_bytes == 1000 and r.per_sample_bytes == 100
    assert r.probes <= 4


def test_fit_with_accumulation_searches_the_micro_batch():
    r = search(affine(1000, 100), 5000, parse_combo("accum4"))
    assert r.micro_batch == 10 and r.batch == 40


def test_fit_nonlinear_still_exact():
    def probe(batch):  # attention-like: grows with batch², the line underestimates
        return Probe(batch, "ok", 500 + 10 * batch + batch * batch)

    r = search(probe, 20_000, Techniques())
    best = max(b for b in range(1, 1000) if 500 + 10 * b + b * b <= 20_000)
    assert r.batch == best and r.probes < 20


def test_fit_none_fits_and_errors():
    assert search(affine(10_000, 1), 5000, Techniques()).status == "none-fits"
    r = search(affine(1000, 100, error_at=2), 5000, Techniques())
    assert r.status == "error" and r.error == "boom"


def test_fit_capped_when_the_peak_does_not_grow():
    r = search(affine(1000, 0), 5000, Techniques(), max_micro=64)
    assert r.capped and r.batch == 64


def test_confirm_steps_down_on_real_oom():
    r = search(affine(1000, 100), 5000, Techniques())

    def cuda(batch):  # the real allocator needs 5 % more than the prediction
        need = int((1000 + 100 * batch) * 1.05)
        return Probe(batch, "ok" if need <= 5000 else "oom", need, None, need + 64)

    r = confirm(r, cuda, Techniques())
    assert r.cuda_status == "ok" and r.cuda_micro_batch == 37  # 1.05 × 4800 > 5000
    assert r.cuda_margin_bytes == 5000 - (int((1000 + 3700) * 1.05) + 64)
    assert any("largest that ran was 37" in n for n in r.notes)


# ---- real runs (sim, small) --------------------------------------------------------------------------
def test_sim_in_process_techniques_change_the_peak():
    from lab.measure.measure import measure_variant
    from lab.playground import experiment

    w = get_workload("mlp")
    peaks = {}
    for label in ("baseline", "ckpt", "eval", "sgd"):
        t = parse_combo(label)
        params = {**w.default_sizes("small"), "workload": "mlp", "techniques": t.to_dict()}
        r = measure_variant(experiment.combo, lesson="playground", variant=label, mode="sim",
                            scale="small", params=params, timing=False)
        assert r.ok, r.error
        peaks[label] = r.peak.bytes
    assert peaks["ckpt"] < peaks["baseline"]  # fewer activations kept for backward
    assert peaks["eval"] < peaks["ckpt"]  # no graph, no gradients, no optimizer state
    assert peaks["sgd"] < peaks["baseline"]  # one momentum buffer instead of Adam's two


@pytest.mark.slow
def test_compare_through_real_workers_sim():
    from lab.runner.client import SubprocessRunner

    plan = ComparePlan("linear", {**get_workload("linear").default_sizes("small"), "batch": 64},
                       parse_combos(["baseline", "sgd"]), "sim", "small", timeout_s=120)
    c = run_compare(plan, SubprocessRunner())
    assert [r.status for r in c.rows] == ["ok", "ok"], [r.error for r in c.rows]
    assert c.rows[1].delta_bytes < 0 and c.results[0].lesson == "playground"
    assert c.rows[0].step_time_s is None  # sim: no timings


# ---- the CLI ------------------------------------------------------------------------------------------
def _cli(capsys, *argv):
    from lab.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, expect", [
    (["compare", "gpt7"], "no workload 'gpt7'"),
    (["compare", "mlp", "--combo", "bf16+warp"], "unknown technique"),
    (["compare", "linear", "--combo", "ckpt"], "does not support ckpt"),
    (["compare", "mlp", "--gpu-memory", "lots"], "--gpu-memory"),
    (["compare", "linear", "--seq", "5"], "no sequence length"),
    (["compare", "mlp", "--set", "layers"], "KEY=VALUE"),
    (["compare", "mlp", "--batch", "6", "--combo", "accum4"], "not divisible"),
    (["fit", "mlp"], "--gpu-memory is required"),
    (["fit", "mlp", "--gpu-memory", "16 parsecs"], "--gpu-memory"),
    (["fit", "mlp", "--gpu-memory", "0GB"], "--gpu-memory"),
])
def test_cli_bad_input_one_line_exit_2(capsys, argv, expect):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and expect in err


def test_cli_list(capsys):
    code, out, _ = _cli(capsys, "compare", "--list")
    assert code == 0 and "linear" in out and "mlp" in out


def test_headless_imports():
    code = ("import sys, lab.playground, lab.playground.text, lab.export; "
            "bad = [m for m in ('textual', 'plotext', 'rich', 'torch') if m in sys.modules]; "
            "sys.exit(f'imported {bad}' if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr or r.stdout
