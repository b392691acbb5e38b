"""`memlab fit`: the search (driven by formulas), logs extrapolated along the batch, the
allocator model's decision, and the bars against the H200 ground truth of the plain HF loop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.workloads import TrainConfig, get_workload, parse_combo
from lab.workloads.fit import Probe, confirm, search
from lab.workloads.fit_sim import LogProbe, extrapolate, predict, record_pair, sim_recorder

ROOT = Path(__file__).resolve().parents[2]
GROUND_TRUTH = json.loads((ROOT / "assets" / "ground_truth" / "h200_hf_loop.json").read_text())
GiB = 2**30


# ---- the search, driven by formulas --------------------------------------------------------------
def affine(fixed, per_sample, error_at=None):
    def probe(batch):
        if error_at is not None and batch >= error_at:
            return Probe(batch, "error", 0, "boom")
        return Probe(batch, "ok", fixed + per_sample * batch)

    return probe


def test_fit_affine_needs_few_probes():
    r = search(affine(1000, 100), 5000, TrainConfig())
    assert r.status == "ok" and r.batch == 40 and r.peak_bytes == 5000 and r.margin_bytes == 0
    assert r.next_peak_bytes == 5100 and r.fixed_bytes == 1000 and r.per_sample_bytes == 100
    assert r.probes <= 4
    assert r.optimizer["cls"] == "AdamW" and r.optimizer["state_bytes_per_param"] == 8


def test_fit_with_accumulation_searches_the_micro_batch():
    r = search(affine(1000, 100), 5000, parse_combo("accum4"))
    assert r.micro_batch == 10 and r.batch == 40


def test_fit_nonlinear_still_exact():
    def probe(batch):  # attention-like: grows with batch², the line underestimates
        return Probe(batch, "ok", 500 + 10 * batch + batch * batch)

    r = search(probe, 20_000, TrainConfig())
    best = max(b for b in range(1, 1000) if 500 + 10 * b + b * b <= 20_000)
    assert r.batch == best and r.probes < 20


def test_fit_none_fits_only_one_fits_and_errors():
    assert search(affine(10_000, 1), 5000, TrainConfig()).status == "none-fits"
    one = search(affine(4000, 900), 5000, TrainConfig())  # 2 needs 5800: only batch 1
    assert one.status == "ok" and one.batch == 1
    r = search(affine(1000, 100, error_at=2), 5000, TrainConfig())
    assert r.status == "error" and r.error == "boom"


def test_fit_capped_when_the_peak_does_not_grow():
    r = search(affine(1000, 0), 5000, TrainConfig(), max_micro=64)
    assert r.capped and r.batch == 64


def test_fit_decides_by_reserved_and_oom_not_by_tensor_bytes():
    # Given allocated bytes that fit but reserved segments that do not, the batch does not fit.
    def probe(batch):
        alloc, reserved = 1000 + 100 * batch, 1500 + 120 * batch
        return Probe(batch, "ok" if reserved <= 5000 else "oom", alloc, None, reserved)

    r = search(probe, 5000, TrainConfig())
    assert r.batch == 29 and r.reserved_bytes == 1500 + 120 * 29 and r.margin_bytes == 20


def test_fit_looks_past_a_fragmentation_hole():
    # Given 12 runs out of memory while 13 fits (as the allocator model says of llama-3.2-1b
    # bf16+ckpt under 40 GiB), the answer is 13 and the note names 12.
    # (the line through 2 and 3 overshoots to 22; the bisection meets 12 before 13)
    def probe(batch):
        ok = batch <= 13 and batch != 12
        need = 200 + 55 * (batch - 2)
        return Probe(batch, "ok" if ok else "oom", 70 * batch, None, need, need_bytes=need,
                     need_allocated=70 * batch)

    r = search(probe, 1300, TrainConfig())
    assert r.batch == 13 and any("not every smaller batch fits: 12 run" in n for n in r.notes)


def test_confirm_steps_down_on_real_oom():
    r = search(affine(1000, 100), 5000, TrainConfig())

    def cuda(batch):  # the real allocator needs 5 % more than the prediction
        need = int((1000 + 100 * batch) * 1.05)
        return Probe(batch, "ok" if need <= 5000 else "oom", need, None, need + 64)

    r = confirm(r, cuda, TrainConfig())
    assert r.cuda_status == "ok" and r.cuda_micro_batch == 37  # 1.05 × 4800 > 5000
    assert r.cuda_margin_bytes == 5000 - (int((1000 + 3700) * 1.05) + 64)
    assert any("largest that ran was 37" in n for n in r.notes)


# ---- logs along the batch ------------------------------------------------------------------------
def program(m: int, quirk: int = 0) -> list[tuple]:
    """A toy training step's allocator log at micro-batch m: weights, an activation per sample,
    a workspace; `quirk` adds an allocation whose size is not affine in m."""
    log = [("alloc", 0, 4096), ("alloc", 1, 3000 * m), ("alloc", ("ws", "main"), 512),
           ("alloc", 2, 1024 * m + 512), ("free", 2), ("free", 1)]
    if quirk:
        log.append(("alloc", 3, quirk * m * m))
    return log


def test_extrapolate_is_exact_when_sizes_are_affine():
    assert extrapolate(program(2), 2, program(3), 3, 17) == program(17)


@pytest.mark.parametrize("other", [program(3)[:-1], program(3)[:1] + [("alloc", 9, 9000)]
                                   + program(3)[2:], program(3, quirk=1)])
def test_extrapolate_refuses_another_program(other):
    assert extrapolate(program(2), 2, other, 3, 17) is None


def test_extrapolate_refuses_sizes_that_are_not_affine():
    # 2m² at 2 and 3 gives a slope of 10; at m = 17 the line says 88, the program 578: the
    # base pair cannot tell, the real runs at the answer and the batch after it do (below)
    assert extrapolate(program(2, 2), 2, program(3, 2), 3, 17) != program(17, 2)


def test_extrapolate_interpolates_between_anchors_far_apart():
    assert extrapolate(program(2), 2, program(9), 9, 5) == program(5)  # affine: exact
    # min(6m, 40) at 3 (18) and 8 (40): a slope of 4.4 per batch, so 26.8 at 5 and 22.4 at 4,
    # rounded to the nearest byte (a guess, not None: the same program)
    at3, at8 = [("alloc", "buf", 18), ("free", "buf")], [("alloc", "buf", 40), ("free", "buf")]
    assert [extrapolate(at3, 3, at8, 8, m)[0][2] for m in (4, 5, 10)] == [22, 27, 49]


class Rec:
    def __init__(self, log, status="ok", error=None):
        self.log, self.status, self.error = log, status, error


def all_real(record, cap, cfg=TrainConfig(), max_micro=4096):
    """The reference: the same search with every batch simulated (predict's fallback)."""
    probe = LogProbe(record, cap, cfg.micro_batches)
    probe.extrapolating = False
    res = search(probe, cap, cfg, max_micro)
    res.sim_runs = probe.sim_runs
    return res


def test_log_probe_replays_the_line_and_simulates_the_answer_and_the_next():
    # program(m) reserves 2 MiB small segments (all < 1 MiB) until m reaches the large pool
    record = lambda batch: Rec(program(batch))  # noqa: E731
    cap = 20 * 2**20
    res = predict(record, cap, TrainConfig(), max_micro=4096)
    # 2 and 3 (the line), then the answer and the first batch that does not fit, two at once;
    # every other batch asked about was a replay of the line
    m = res.micro_batch
    assert res.status == "ok" and m > 3 and res.simulated_micro_batches == [2, 3, m, m + 1]
    assert res.sim_runs == 4 < res.probes and not res.notes  # the line held: nothing to say
    assert m == all_real(record, cap).micro_batch


def test_a_prediction_freezes_the_heap_while_it_runs_and_thaws_it_after():
    # Given a record that looks at the collector, when predict runs, then what was alive before
    # is frozen during the sim runs (their full collections skip it) and thawed after
    import gc

    before, during = gc.get_freeze_count(), []

    def record(batch):
        during.append(gc.get_freeze_count())
        return Rec(program(batch))

    predict(record, 20 * 2**20, TrainConfig(), max_micro=4096)
    assert during and min(during) > before
    assert gc.get_freeze_count() == before


MiB = 2**20


def piecewise(m: int) -> list[tuple]:
    """A training step whose reduction staging buffer stops growing at 40 MiB (as CUDA's does
    once the blocks are clamped to the SMs: lab/measure/sim/kernels/reduce.py): every other size is
    affine in the micro-batch m."""
    return [("alloc", "weights", 64 * MiB), ("alloc", "act", 8 * MiB * m),
            ("alloc", ("reduce", "buffer"), min(6 * MiB * m, 40 * MiB)),
            ("free", ("reduce", "buffer")), ("alloc", "grad", 4 * MiB * m), ("free", "grad"),
            ("free", "act")]


def test_log_probe_with_a_size_that_is_not_affine_simulates_few_batches():
    # Given one allocation that is piecewise in the batch, the line through 2 and 3 is wrong
    # at the answer; the answer and the next batch are simulated, become anchors, and the
    # search on the corrected line ends on two real runs. Fewer runs than batches asked about,
    # and the answer is the one every batch simulated gives.
    from lab.measure.sim.allocator.replay import replay

    record = lambda batch: Rec(piecewise(batch))  # noqa: E731
    cap = 400 * MiB
    res = predict(record, cap, TrainConfig(), max_micro=4096)
    ref = all_real(record, cap)
    m = res.micro_batch
    assert res.status == "ok" and m == ref.micro_batch == 28
    assert replay(piecewise(m), cap=cap).oom is None and replay(piecewise(m + 1), cap=cap).oom
    assert extrapolate(piecewise(2), 2, piecewise(3), 3, m) != piecewise(m)  # not the line's
    assert {m, m + 1} <= set(res.simulated_micro_batches)  # (a) the answer and the next: real
    assert res.sim_runs == len(res.simulated_micro_batches) < res.probes  # (b)
    assert res.sim_runs < ref.sim_runs == ref.probes  # all real: one run per batch asked
    assert any("not every allocation is affine" in n and f"{m}, {m + 1}" in n for n in res.notes)
    assert not any("every batch was simulated" in n for n in res.notes)


def test_log_probe_falls_back_to_real_runs_when_the_line_does_not_settle():
    # a size quadratic in the batch: each round's answer moves (the chord between anchors far
    # apart overestimates it), and after ROUNDS rounds every batch is simulated
    from lab.measure.sim.allocator.replay import replay

    def record(batch):
        return Rec(program(batch, quirk=40_000))

    res = predict(record, 24 * 2**20, TrainConfig(), max_micro=4096)
    fits = [m for m in range(1, 200) if replay(program(m, 40_000), cap=24 * 2**20).oom is None]
    assert res.micro_batch == max(fits) == all_real(record, 24 * 2**20).micro_batch
    assert any("did not follow the line" in n and "every batch was simulated" in n
               for n in res.notes)


def test_log_probe_falls_back_when_two_anchors_are_not_one_program():
    # from micro-batch 6 up the program allocates once more: the line through 2 and 3 guesses
    # an answer, its real run has another event, and every batch is simulated from there
    def step(m):
        return program(m) + ([("alloc", "extra", 4096)] if m >= 6 else [])

    record = lambda batch: Rec(step(batch))  # noqa: E731
    cap = 20 * 2**20
    res = predict(record, cap, TrainConfig(), max_micro=4096)
    assert res.micro_batch == all_real(record, cap).micro_batch
    assert any("make no line" in n and "every batch was simulated" in n for n in res.notes)
    assert res.sim_runs >= res.probes  # every batch the last search asked about was real


def test_log_probe_reports_a_failed_run():
    probe = LogProbe(lambda b: Rec([], "error", "RuntimeError: boom"), 2**30)
    p = probe(2)
    assert p.status == "error" and p.error == "RuntimeError: boom"


def test_record_pair_forks_and_returns_both_in_order():
    import os
    import threading

    def record(b):
        r = Rec(program(b))
        r.pid = os.getpid()
        return r

    out = record_pair(record, [2, 3])
    assert [r.log for r in out] == [program(2), program(3)]
    if threading.active_count() == 1:  # fork is used only without other threads
        assert out[0].pid != os.getpid() == out[1].pid


def test_record_pair_redoes_a_hung_child_here():
    import os
    import threading
    import time

    if threading.active_count() > 1:
        pytest.skip("other threads in this process: record_pair does not fork")
    parent = os.getpid()

    def record(b):
        if os.getpid() != parent:
            time.sleep(60)  # the child hangs
        return Rec(program(b))

    t = time.monotonic()
    out = record_pair(record, [2, 3], timeout_s=1.0)
    assert [r.log for r in out] == [program(2), program(3)] and time.monotonic() - t < 30


# ---- real sim, small ----------------------------------------------------------------------------
def test_fit_by_simulation_fits_and_one_more_does_not():
    # Given a cap exactly at what micro-batch 4 reserves, the answer is 4 (accum2: batch 8), and
    # the allocator model says 5 runs out of memory under that cap.
    from lab.measure.sim.allocator.replay import replay

    # one sample's output is 1 MiB: the reserved segments grow with the batch
    sizes = {**get_workload("linear").default_sizes("small"), "d_in": 64, "d_out": 1 << 18}
    cfg = parse_combo("accum2")
    rec = sim_recorder("linear", sizes, cfg)
    cap = replay(rec(8).log).peak_reserved
    r = predict(rec, cap, cfg, max_micro=64)
    assert r.status == "ok" and r.batch == 8 and r.micro_batch == 4
    assert replay(rec(10).log, cap=cap).oom is not None


@pytest.mark.slow  # sim records of many ranks: keeps the quick tier under 2 minutes
def test_fit_on_many_gpus_records_rank_0_of_the_simulated_ranks():
    # --gpus 8 with fsdp: the log is rank 0's of 8 (its shard, not the whole model), the line
    # through micro-batches 2 and 3 holds for it, and the answer is per GPU
    from lab.measure.sim.allocator.replay import replay

    sizes = get_workload("gpt2-tiny").default_sizes("small")
    cfg = parse_combo("fsdp")
    rec = sim_recorder("gpt2-tiny", sizes, cfg, gpus=8)
    logs = {m: rec(m).log for m in (2, 3, 5)}
    assert extrapolate(logs[2], 2, logs[3], 3, 5) == logs[5]
    cap = replay(rec(4).log).peak_reserved
    assert cap < replay(sim_recorder("gpt2-tiny", sizes, cfg)(4).log).peak_reserved
    r = predict(rec, cap, cfg, max_micro=64)
    assert r.status == "ok" and r.batch == 4 and r.reserved_bytes <= cap
    assert any("8 ranks is a rank-0 extrapolation" in n for n in r.notes)


@pytest.mark.slow  # two fits on 8 simulated ranks (~9 s on 2 cores)
def test_fit_cli_with_gpus_says_batch_per_gpu(capsys):
    from lab.cli import main

    argv = ["fit", "gpt2-tiny", "--scale", "small", "--gpus", "8", "--gpu-memory", "1GiB",
            "--combo", "ddp", "--combo", "fsdp", "--max-batch", "64", "--no-confirm"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == 8 and out["gpu"] is None and out["limit"] and out["rule"]
    ddp, fsdp = out["results"]
    assert ddp["status"] == fsdp["status"] == "ok" and fsdp["batch"] >= ddp["batch"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "on 8 GPUs, batch per GPU" in out and "headroom: none beyond that" in out
    # sim is named as sim: what predicts, and where the numbers come from
    assert "predicting in sim" in err and "predicted: simulated (small scale" in out


# ---- the bars (sim only; the ground truth is the H200's, bench/h200_ground_truth.py) -------------
def _fit_json(capsys, argv: list[str]) -> dict:
    from lab.cli import main

    assert main(argv + ["--no-confirm", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow  # two sim records of GPT-2: the quick tier keeps under 2 minutes without it
def test_fit_gpt2_small_names_8_and_20_under_16_gib(capsys):
    out = _fit_json(capsys, ["fit", "gpt2-small", "--gpu-memory", "16GiB", "--combo", "baseline",
                             "--combo", "bf16+ckpt"])
    assert [r["batch"] for r in out["results"]] == [8, 20]
    assert all(r["reserved_bytes"] <= 16 * GiB for r in out["results"])


@pytest.mark.slow
@pytest.mark.parametrize("case", GROUND_TRUTH["fit"], ids=lambda c: f"{c['model']}-{c['combo']}")
def test_fit_never_above_the_h200_on_the_ground_truth(capsys, case):
    out = _fit_json(capsys, ["fit", "--model", case["model"], "--gpu-memory",
                             f"{case['cap_gib']}GiB", "--seq", str(case["seq"]), "--combo",
                             case["combo"].replace("fp32", "baseline")])
    got = out["results"][0]["batch"]
    assert got <= case["largest_batch"]
    assert got == case["largest_batch"]  # all 8 today (bench/sim_vs_ground_truth.py)
