"""The playground: the compare plan and rows (injected runner), real workers, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.measure.result import DeviceInfo, Peak, RunResult, Timeline
from lab.playground import ComparePlan, Comparison, run_compare
from lab.workloads import EXPERIMENT, TOKENS, TrainConfig, get_workload, parse_combo, parse_combos


def test_plan_points_every_combination_at_the_generic_experiment():
    combos = parse_combos(["baseline", "bf16+ckpt"])
    reqs = ComparePlan("mlp", {"batch": 2, "seq": 8}, combos, "sim", "small").requests()
    assert [r.variant for r in reqs] == ["combo", "combo"]
    assert all(r.experiment == EXPERIMENT and Path(r.experiment).is_file() for r in reqs)
    assert reqs[1].params["config"] == parse_combo("bf16+ckpt").to_dict()
    assert reqs[1].params["optimizer"]["cls"] == "AdamW"
    assert reqs[0].params["workload"] == "mlp" and not reqs[0].timing  # sim: nothing to time


@pytest.mark.parametrize("token", [t.name for t in TOKENS])
def test_a_token_means_the_same_optimizer_on_every_workload(token):
    # Given one token, the requests for the regression MLP and the language models carry the
    # same optimizer (class, settings, state bytes per parameter): one meaning everywhere.
    # a token that only qualifies another (offload: fsdp's CPUOffloadPolicy) comes with it
    cfg = parse_combo({"accumN": "accum4", "offload": "fsdp+offload"}.get(token, token))
    seen = set()
    for name in ("mlp", "gpt2-tiny", "gpt2-small", "qwen2-1.5b"):
        if cfg.kinds() - get_workload(name).supports:  # ddp/zero1/fsdp: the language models
            continue
        sizes = get_workload(name).default_sizes("small")
        [req] = ComparePlan(name, sizes, [cfg], "sim", "small").requests()
        seen.add(json.dumps(req.params["optimizer"], sort_keys=True))
    assert len(seen) == 1


# ---- compare, with an injected runner -----------------------------------------------------------
def _result(variant, peak, step=None, status="ok") -> RunResult:
    return RunResult(lesson="playground", variant=variant, mode="cpu", scale="small",
                     device=DeviceInfo("CPU", "cpu"), status=status, peak=Peak(bytes=peak, index=1),
                     timeline=Timeline(index=[0, 1, 2], t=[0, .1, .2], live=[0, peak, 0], events=3),
                     step_time_s=step,
                     error=None if status == "ok" else "CUDA out of memory. Tried to allocate")


class FakeRunner:
    """Replays peaks by combination (what a worker would have measured)."""

    def __init__(self, by_label):
        self.by_label, self.requests = by_label, []

    def run(self, req, on_event=None, cancel=None):
        self.requests.append(req)
        label = TrainConfig.from_dict(req.params["config"]).label
        if on_event:
            on_event({"type": "phase", "name": "forward 0", "live_bytes": 1})
        peak, step, status = self.by_label.get(label, (1000, None, "ok"))
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
    assert c.results[2].params["config"]["micro_batches"] == 2  # even a failed run says what ran
    assert events == ["baseline", "bf16+ckpt", "accum2"]
    again = Comparison.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again.rows == c.rows and again.results[1].peak.bytes == 600


@pytest.mark.slow
def test_compare_through_real_workers_sim():
    from lab.runner.client import SubprocessRunner

    plan = ComparePlan("linear", {**get_workload("linear").default_sizes("small"), "batch": 64},
                       parse_combos(["baseline", "sgd"]), "sim", "small", timeout_s=120)
    c = run_compare(plan, SubprocessRunner())
    assert [r.status for r in c.rows] == ["ok", "ok"], [r.error for r in c.rows]
    assert c.rows[1].delta_bytes < 0 and c.results[0].lesson == "playground"
    assert c.rows[0].step_time_s is None  # sim: no timings
    assert [p.name for p in c.results[0].phases][:4] == ["model", "data 0", "forward 0",
                                                        "backward 0"]
    assert c.results[1].params["optimizer"]["state_bytes_per_param"] == 0


# ---- the CLI ------------------------------------------------------------------------------------------
def _cli(capsys, *argv):
    from lab.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv, expect", [
    (["compare", "gpt7"], "no workload 'gpt7'"),
    (["compare", "mlp", "--combo", "bf16+warp"], "unknown token 'warp'"),
    (["compare", "linear", "--combo", "ckpt"], "does not support checkpointing"),
    (["compare", "mlp", "--gpu-memory", "lots"], "--gpu-memory"),
    (["compare", "linear", "--seq", "5"], "no sequence length"),
    (["compare", "mlp", "--set", "layers"], "KEY=VALUE"),
    (["compare", "mlp", "--set", "dtype=bfloat16"], "has no size dtype"),
    (["compare", "mlp", "--batch", "6", "--combo", "accum4"], "not divisible"),
    (["fit", "mlp"], "give --gpu-memory SIZE"),
    (["fit", "mlp", "--gpu-memory", "16 parsecs"], "--gpu-memory"),
    (["fit", "mlp", "--gpu-memory", "0GB"], "--gpu-memory"),
])
def test_cli_bad_input_one_line_exit_2(capsys, argv, expect):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1 and expect in err


def test_cli_list(capsys):
    code, out, _ = _cli(capsys, "compare", "--list")
    assert code == 0 and all(name in out for name in ("linear", "mlp", "gpt2-tiny", "qwen2-1.5b"))


@pytest.mark.parametrize("command", ["compare", "fit"])
def test_cli_help_lists_every_token(capsys, command):
    with pytest.raises(SystemExit):
        _cli(capsys, command, "--help")
    out = capsys.readouterr().out
    for t in TOKENS:
        assert f"  {t.name} " in out and t.meaning.split(":")[0][:30] in " ".join(out.split())


@pytest.mark.parametrize("workload", ["mlp", "gpt2-tiny"])
def test_cli_compare_json_names_the_optimizer(capsys, monkeypatch, workload):
    # the bar: `memlab compare mlp|gpt2-tiny --combo sgd --mode sim --json` name one optimizer
    import lab.runner.client

    monkeypatch.setattr(lab.runner.client, "SubprocessRunner", lambda: FakeRunner({}))
    code, out, _ = _cli(capsys, "compare", workload, "--combo", "sgd", "--mode", "sim", "--json")
    assert code == 0
    optimizer = json.loads(out)["results"][0]["params"]["optimizer"]
    assert optimizer == {"cls": "SGD", "lr": 0.001, "betas": None, "weight_decay": 0.0,
                         "momentum": 0.0, "foreach": True, "fused": None, "state_tensors": 0,
                         "state_bytes_per_param": 0}
