"""lab.experiments: layouts, corpus, train/eval switches, the fit finder."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest
import torch

from lab.experiments import (LAYOUTS, TrainConfig, Workload, build_model, corpus_batch,
                             corpus_tokens, count_params, largest_batch, lm_batch, lm_loss,
                             make_optimizer, predict, train)
from lab.experiments.data import CORPUS_FILE
from lab.experiments.train import autocast, enable_checkpointing
from lab.measure.simulate import fake_mode


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    # transformers' model code imported once, then frozen: the engine's gc.collect() after each
    # simulated run then scans only what the run made (the fit finder runs many of them)
    build_model("tiny", "cpu")
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("name", ["gpt2-124m", "qwen2-1.5b"])
def test_big_layouts_have_the_published_parameter_counts(name):
    # Given a layout's config, when the model is built under FakeTensorMode (no memory used),
    # then its parameter count is the one the layout (and the lessons' formulas) state.
    with fake_mode():
        model = build_model(name, "cpu")
    assert count_params(model) == LAYOUTS[name].params


def test_tiny_layout_builds_on_cpu_with_real_weights():
    model = build_model("tiny", "cpu")
    assert count_params(model) == 462_336  # lessons/*/lesson.toml small scale: param_count
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


def test_train_config_rejects_unknown_switches():
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp8")
    with pytest.raises(ValueError, match="micro_batches"):
        TrainConfig(micro_batches=0)


def test_autocast_is_a_no_op_for_fp32_and_casts_matmuls_for_bf16():
    a = torch.randn(4, 4)
    with autocast(torch.device("cpu"), "fp32"):
        assert (a @ a).dtype == torch.float32
    with autocast(torch.device("cpu"), "bf16"):
        assert (a @ a).dtype == torch.bfloat16


class _Run:
    """The smallest `run` the library's train loop needs, without the tracker."""

    def __init__(self):
        from lab.measure.session import Session

        self.s = Session("cpu", {}, torch.device("cpu"))

    def __getattr__(self, name):
        return getattr(self.s, name)


def test_tiny_model_loss_goes_down_on_the_corpus():
    torch.manual_seed(0)
    run = _Run()
    train(run, Workload("tiny", 16, 64, TrainConfig()), 40)  # lesson 03's small scale
    first, last = run.metrics["loss_first"], run.metrics["loss_last"]
    assert first > 5.0  # about ln(256) = 5.55 for random weights
    assert last < 3.0  # lesson 03 says "to about 2.5"


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


@pytest.mark.parametrize("how", ["blocks", "hf"])
def test_checkpointing_gives_the_same_gradients(how):
    x, y = corpus_batch(4, 32, 0, "cpu")
    plain = _fresh_tiny()
    lm_loss(plain, x, y).backward()
    ckpt = _fresh_tiny()
    enable_checkpointing(ckpt, how)
    lm_loss(ckpt, x, y).backward()
    for g1, g2 in zip(_grads(plain), _grads(ckpt)):
        torch.testing.assert_close(g2, g1, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("opt,impl,state_per_param", [
    ("sgd", "foreach", 0), ("momentum", "foreach", 1), ("adamw", "foreach", 2),
    ("adamw", "fused", 2), ("adamw", "for-loop", 2)])
def test_optimizers_keep_the_state_they_promise(opt, impl, state_per_param):
    model = _fresh_tiny()
    o = make_optimizer(model, TrainConfig(optimizer=opt, impl=impl))
    x, y = corpus_batch(2, 16, 0, "cpu")
    lm_loss(model, x, y).backward()
    o.step()
    big = sum(v.numel() for s in o.state.values() for v in s.values()
              if torch.is_tensor(v) and v.dim() > 0)
    assert big == state_per_param * count_params(model)


def test_predict_reports_peak_and_virtual_oom():
    work = Workload("tiny", 8, 32, TrainConfig())
    p = predict(work)
    assert p.fits and p.peak_bytes > 0 and p.peak_phase
    small = predict(work, capacity_bytes=p.peak_bytes // 2)
    assert not small.fits and small.status == "oom" and "out of memory" in small.error


def test_largest_batch_fits_and_one_more_does_not():
    # Given a capacity, the answer B fits and B + 1 does not; both were checked by simulation.
    # (sim's allocator model reserves ~66 MiB of cuBLAS workspaces before any activation)
    cap = 100_000_000
    work = Workload("tiny", 1, 32, TrainConfig())
    best, tried = largest_batch(work, cap, max_batch=256)
    assert best > 2
    by_batch = {p.workload.batch: p for p in tried}
    assert by_batch[best].fits and by_batch[best].peak_bytes * 1.1 <= cap
    assert not predict(Workload("tiny", best + 1, 32, TrainConfig()), cap).fits
    assert len(tried) < 12


def test_largest_batch_respects_micro_batches_and_reports_none_when_nothing_fits():
    work = Workload("tiny", 2, 32, TrainConfig(micro_batches=2))
    best, _ = largest_batch(work, 90_000_000, max_batch=64)
    assert best % 2 == 0 and best > 0
    assert largest_batch(work, 1_000_000, max_batch=64)[0] == 0


def test_experiments_are_headless():
    code = ("import sys, lab.experiments, lab.experiments.gpu, lab.experiments.fit; "
            "bad = [m for m in ('textual', 'rich', 'plotext') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
