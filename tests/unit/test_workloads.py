"""lab.workloads: layouts, corpus, the models, the train/eval steps and their switches.

Combinations, the optimizer factory and the fit search are in test_combos.py; the playground's
compare and the CLI in test_playground.py.
"""

from __future__ import annotations

import gc

import pytest
import torch

from lab.measure.backends import backend_for

from lab.measure.measure import VariantSpec, measure
from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.workloads import LAYOUTS, TrainConfig, get_workload, parse_combo
from lab.workloads.data import CORPUS_FILE, corpus_batch, corpus_tokens, lm_batch
from lab.workloads.experiment import combo
from lab.workloads.models import build_model, count_params, lm_loss
from lab.workloads.tasks import LM, MLP, task_for
from lab.workloads.train import autocast, enable_checkpointing, train


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    # transformers' model code imported once, then frozen: the engine's gc.collect() after each
    # simulated run then scans only what the run made
    build_model("tiny", "cpu")
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def sim(workload: str, combo_text: str, scale: str = "small", **sizes):
    """One run of the generic experiment in simulation, in this process."""
    w = get_workload(workload)
    cfg = parse_combo(combo_text)
    params = {**w.default_sizes(scale), **sizes, "workload": workload, "config": cfg.to_dict()}
    r = measure(combo,
                VariantSpec("playground", cfg.label, scale, params, timing=False),
                backend_for("sim"))
    assert r.ok, r.error
    return r


# ---- layouts and data ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpt2-124m", "qwen2-1.5b"])
def test_big_layouts_have_the_published_parameter_counts(name):
    # Given a layout's config, when the model is built under FakeTensorMode (no memory used),
    # then its parameter count is the one the layout (and the lessons' formulas) state.
    with fake_mode():
        model = build_model(name, "cpu")
    assert count_params(model) == LAYOUTS[name].params


def test_tiny_layout_builds_on_cpu_with_real_weights():
    model = build_model("tiny", "cpu")
    assert count_params(model) == 462_336 == LAYOUTS["tiny"].params  # lesson.toml: param_count
    assert len(list(model.parameters())) == 28


def test_corpus_is_small_ascii_public_domain_text():
    raw = CORPUS_FILE.read_bytes()
    assert 100_000 < len(raw) < 300_000
    raw.decode("ascii")
    assert raw.startswith(b"In the beginning God created the heaven and the earth.")
    assert (CORPUS_FILE.parent / "README.md").exists()
    assert corpus_tokens().dtype.name == "uint8"


def test_corpus_batches_are_next_token_pairs_and_deterministic():
    x, y = corpus_batch(4, 32, step=3, device="cpu")
    assert x.shape == y.shape == (4, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one token
    x2, _ = corpus_batch(4, 32, step=3, device="cpu")
    assert torch.equal(x, x2)
    x3, _ = corpus_batch(4, 32, step=4, device="cpu")
    assert not torch.equal(x, x3)


def test_random_batches_stay_in_the_vocabulary():
    x, y = lm_batch(LAYOUTS["gpt2-124m"], 2, 16, 0, "cpu")
    assert x.shape == (2, 16) and int(x.max()) < 50257 and torch.equal(x[:, 1:], y[:, :-1])


def test_tasks_refuse_sizes_they_do_not_have():
    assert task_for(get_workload("mlp"), {"batch": 2, "layers": 3}) == MLP(batch=2, layers=3)
    assert task_for(get_workload("gpt2-small"), {"layout": "tiny", "steps": 2}) == LM("tiny")
    with pytest.raises(ValueError, match="has no size d_ff"):
        task_for(get_workload("mlp"), {"d_ff": 5})


def test_autocast_is_a_no_op_for_fp32_and_pure_bf16_and_casts_matmuls_for_bf16():
    a = torch.randn(4, 4)
    for precision in ("fp32", "pure-bf16"):
        with autocast(torch.device("cpu"), precision):
            assert (a @ a).dtype == torch.float32
    with autocast(torch.device("cpu"), "bf16"):
        assert (a @ a).dtype == torch.bfloat16


# ---- training: the loss, accumulation, checkpointing ----------------------------------------------
class _Run:
    """The smallest `run` the train loop needs, without the tracker."""

    def __init__(self):
        from lab.measure.session import Session

        self.s = Session.for_mode("cpu")

    def __getattr__(self, name):
        return getattr(self.s, name)


def test_tiny_model_loss_goes_down_in_a_few_steps():
    torch.manual_seed(0)
    run = _Run()
    train(run, LM("tiny", 4, 16), TrainConfig(lr=1e-2), 4)  # the 40-step lesson run: slow tier
    first, last = run.metrics["loss_first"], run.metrics["loss_last"]
    assert first > 5.0  # about ln(256) = 5.55 for random weights
    assert last < first - 1.0
    assert [p.name for p in run.phases[:6]] == ["model", "data 0", "forward 0", "backward 0",
                                                "step 0", "zero_grad 0"]


@pytest.mark.slow
def test_tiny_model_loss_reaches_lesson_03s_number():
    torch.manual_seed(0)
    run = _Run()
    train(run, LM("tiny", 16, 64), TrainConfig(), 40)  # lesson 03's small scale
    assert run.metrics["loss_first"] > 5.0
    assert run.metrics["loss_last"] < 3.0  # lesson 03 says "to about 2.5"


def _grads(model):
    return [p.grad.detach().clone() for p in model.parameters()]


def _fresh_tiny():
    torch.manual_seed(0)
    return build_model("tiny", "cpu")


def test_accumulated_gradients_equal_full_batch_gradients():
    x, y = corpus_batch(8, 32, 0, "cpu")
    full = _fresh_tiny()
    lm_loss(full, x, y).backward()
    acc = _fresh_tiny()
    for xm, ym in zip(x.chunk(4), y.chunk(4)):
        (lm_loss(acc, xm, ym) / 4).backward()
    for g1, g2 in zip(_grads(full), _grads(acc)):
        torch.testing.assert_close(g2, g1, rtol=1e-4, atol=1e-6)


def _saved_bytes(model, x, y) -> tuple[int, torch.Tensor]:
    """Bytes autograd saves for backward during the forward (parameters excluded)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = lm_loss(model, x, y)
    return sum(seen.values()), loss


@pytest.mark.parametrize("how", ["blocks", "hf"])
def test_checkpointing_saves_less_and_gives_the_same_gradients(how):
    # Given the same model and batch with and without checkpointing, when the forward runs,
    # then far fewer bytes are saved for backward (checkpointing keeps only each block's
    # input), and backward still gives the same gradients. A no-op checkpointing fails here.
    x, y = corpus_batch(4, 32, 0, "cpu")
    plain = _fresh_tiny()
    plain_saved, loss = _saved_bytes(plain, x, y)
    loss.backward()
    ckpt = _fresh_tiny()
    enable_checkpointing(ckpt, how)
    ckpt_saved, loss = _saved_bytes(ckpt, x, y)
    loss.backward()
    assert ckpt_saved < 0.7 * plain_saved, (ckpt_saved, plain_saved)
    for g1, g2 in zip(_grads(plain), _grads(ckpt)):
        torch.testing.assert_close(g2, g1, rtol=1e-5, atol=1e-7)


# ---- the generic experiment, simulated --------------------------------------------------------------
def test_phases_are_0_based_with_micro_batches():
    r = sim("mlp", "accum2", steps=2)
    assert [p.name for p in r.phases] == [
        "model", "data 0", "forward 0.0", "backward 0.0", "forward 0.1", "backward 0.1",
        "step 0", "zero_grad 0", "data 1", "forward 1.0", "backward 1.0", "forward 1.1",
        "backward 1.1", "step 1", "zero_grad 1"]
    assert [p.name for p in sim("mlp", "eval").phases] == ["model", "data 0", "eval 0", "data 1",
                                                          "eval 1"]


def test_techniques_change_the_peak_of_the_mlp():
    peaks = {c: sim("mlp", c).peak.bytes for c in ("baseline", "ckpt", "eval", "sgd", "momentum")}
    assert peaks["ckpt"] < peaks["baseline"]  # fewer activations kept for backward
    assert peaks["eval"] < peaks["ckpt"]  # no graph, no gradients, no optimizer state
    assert peaks["sgd"] < peaks["momentum"] < peaks["baseline"]  # 0, 1 and 2 state tensors


@pytest.mark.parametrize("combo_text, itemsize, state_tensors", [
    ("baseline", 4, 2), ("adam", 4, 2), ("momentum", 4, 1), ("sgd", 4, 0), ("pure-bf16", 2, 2),
    ("pure-bf16+momentum", 2, 1), ("fused", 4, 2), ("forloop", 4, 2)])
def test_linear_bytes_are_exact(combo_text, itemsize, state_tensors):
    # nn.Linear(512, 2048): weights and bias in the parameter dtype, gradients the same; the
    # first optimizer step makes `state_tensors` tensors of each parameter's size (+ Adam's
    # float32 `step` counter per parameter tensor) and the second makes none.
    n = 512 * 2048 + 2048
    r = sim("linear", combo_text, steps=2)
    assert r.peak.by_category["parameters"] == n * itemsize
    assert r.peak.by_category["gradients"] == n * itemsize
    counters = 2 * 4 if state_tensors == 2 else 0
    assert r.phase("step 0").delta_bytes == state_tensors * n * itemsize + counters
    assert r.phase("step 1").delta_bytes == 0


def test_pure_bf16_halves_weights_gradients_and_state_of_an_lm():
    base, pure = sim("gpt2-tiny", "baseline"), sim("gpt2-tiny", "pure-bf16")
    for cat in ("parameters",):
        assert pure.peak.by_category[cat] * 2 == base.peak.by_category[cat]
    assert pure.peak.bytes < base.peak.bytes
