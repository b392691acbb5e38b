"""Lessons 19-21 (issue 12): what each one promises, measured.

Quick tests: the tracker's view of a wrapper tensor subclass (torchao's 8-bit optimizer state),
the lesson's hand-written optimizers and cache against the library ones. Slow tests run the
lessons at small scale in cpu mode (and in sim where the mode runs them) through
`measure_request` (the worker's path), in-process. Tests that need an optional extra (peft, torchao) skip without it.
"""

from __future__ import annotations

import functools
import importlib.util

import pytest
import torch

from lab.course.curriculum import load_course
from lab.measure.tracker import TensorTracker
from lab.runner.protocol import RunRequest
from lab.runner.worker import load_experiment, measure_request

from .test_lesson_effects import SCALE
from .test_lesson_effects import measured as lesson_run

COURSE = load_course()
LESSONS = {f"{l.number:02d}": l for l in COURSE.lessons}  # by folder number, as written here
HAS_PEFT = importlib.util.find_spec("peft") is not None
HAS_TORCHAO = importlib.util.find_spec("torchao") is not None


@functools.lru_cache(maxsize=None)
def _module(key):
    return load_experiment(str(LESSONS[key].experiment_path))


@functools.lru_cache(maxsize=None)
def measured(key: str, variant: str, mode: str = "cpu", scale: str = "small"):
    lesson = LESSONS[key]
    if SCALE.get(mode) == scale:  # the run test_lesson_effects makes: once per session, shared
        return lesson_run(lesson.key, variant, mode)  # its keys are the course's (teaching order)
    return measure_request(RunRequest.for_lesson(lesson, variant, mode, scale, timing=False),
                           getattr(_module(key), variant))


def checks(res) -> dict[str, tuple[int, int]]:
    return {c.name: (c.expected_bytes, c.measured_bytes) for c in res.checks}


# ---- the tracker and wrapper tensor subclasses ---------------------------------------------------
class Wrapped(torch.Tensor):
    """A minimal traceable wrapper subclass: appears as fp32 of `shape`, holds uint8 codes and a
    scale (like torchao's OptimState8bit)."""

    @staticmethod
    def __new__(cls, codes, scale):
        return torch.Tensor._make_wrapper_subclass(cls, codes.shape, dtype=torch.float32,
                                                   device=codes.device)

    def __init__(self, codes, scale):
        self.codes, self.scale = codes, scale

    def __tensor_flatten__(self):
        return ["codes", "scale"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return Wrapped(inner["codes"], inner["scale"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(func)


def test_a_wrapper_subclass_is_counted_by_what_it_wraps_and_classified_with_it():
    # Given optimizer state held in a wrapper subclass (1 B codes + a scale per 256 values),
    # when an optimizer's state holds it, then the tracker counts the inner tensors once (no
    # phantom fp32-sized storage for the wrapper) and calls them optimizer state
    tr = TensorTracker()
    with tr:
        tr.phase = "step 0"
        codes = torch.zeros(4096, dtype=torch.uint8)
        scale = torch.zeros(16)
        w = Wrapped(codes, scale)
        tr.register_existing([], "other")
        tr._see(w)  # what the dispatch mode does with an op's wrapper output
        tr.mark(w, "optimizer_state")
    trace = tr.close()
    live = trace.live_at(len(trace.events) - 1)
    assert sum(e.nbytes for e in live.values()) == 4096 + 16 * 4
    assert trace.by_category(live)["optimizer_state"] == 4096 + 16 * 4


class Dequantizing(Wrapped):
    """Like torchao's OptimState8bit: an op on it dequantizes (codes -> fp32 x scale) first, with
    ops of its own on the plain tensors it wraps."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def plain(a):
            return a.codes.float() * a.scale.repeat_interleave(256) if isinstance(a, Dequantizing) else a

        return func(*[plain(a) for a in args], **(kwargs or {}))


def test_the_ops_a_wrapper_subclass_runs_inside_its_own_dispatch_are_counted():
    # Given a wrapper subclass that dequantizes inside its __torch_dispatch__ (an fp32 copy of the
    # codes, the repeated scale, their product), when an op meets it under the tracker, then
    # those intermediates are born and freed in the trace (on CUDA only the allocator saw them
    # before: 6.8 GB in lesson 14's 8-bit step), and the op's result is counted too
    tr = TensorTracker()
    with tr:
        w = Dequantizing(torch.zeros(4096, dtype=torch.uint8), torch.ones(16))
        tr.register_existing([w], "other")
        out = w + 1.0  # aten.add.Tensor: dequantize, then add
    trace = tr.close()
    born = sorted(e.nbytes for e in trace.events if e.kind == "alloc")
    assert born.count(4096 * 4) >= 3  # codes.float(), the repeated scale, the product (+ out)
    assert out.dtype == torch.float32 and max(trace.live_series()) >= 4096 + 64 + 2 * 4096 * 4


@pytest.mark.skipif(not HAS_TORCHAO, reason="needs torchao (pip install 'memlab[torchao]')")
def test_torchao_8bit_state_is_optimizer_state_at_about_2_bytes_per_parameter():
    eager = _module("14").eager_torch_compile
    from torchao.optim import AdamW8bit

    tr = TensorTracker()
    with tr:
        tr.phase = "model"
        model = torch.nn.Linear(1024, 1024, bias=False)
        opt = AdamW8bit(model.parameters(), lr=1e-3)
        tr.phase = "backward 0"
        model(torch.randn(2, 1024)).sum().backward()
        tr.phase = "step 0"
        with eager():
            opt.step()
    trace = tr.close()
    cats = trace.by_category(trace.live_at(len(trace.events) - 1))
    n = 1024 * 1024
    # two moments of 1 B codes + n/256 fp32 scales + a 256-entry fp32 table, and the CPU step
    assert cats["optimizer_state"] == 2 * (n + n // 256 * 4 + 256 * 4) + 4
    assert cats.get("activations", 0) < 1024 * 4  # the input only, none of the state


# ---- lesson 15: LoRA ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not HAS_PEFT, reason="needs peft (pip install 'memlab[peft]')")
@pytest.mark.parametrize("mode", ["cpu", "sim"])
def test_19_lora_saves_gradients_and_state_not_activations(mode):
    scale = SCALE[mode]  # sim at the lesson's seed scale, as test_lesson_effects runs it
    base, lora, ckpt = (measured("15", v, mode, scale) for v in ("baseline", "lora", "lora_checkpoint"))
    assert base.status == lora.status == ckpt.status == "ok", (base.error, lora.error, ckpt.error)
    p = LESSONS["15"].params(scale)
    for res in (base, lora, ckpt):
        c = checks(res)
        params, grads, state = (v for k, v in c.items() if "parameters" in k), \
            (v for k, v in c.items() if "gradients" in k), (v for k, v in c.items() if "state" in k)
        for expected, got in params:
            assert got == expected
        for expected, got in grads:
            assert got == expected  # the adapters' (or every parameter's) gradients, exactly
        for expected, got in state:  # fused AdamW: its step counters sit beside the parameters
            assert got == expected
    assert lora.metrics["trainable_parameters"] == p["layers"] * p["rank"] * (
        9 * p["hidden"] + 2 * p["kv_heads"] * p["hidden"] // p["heads"] + 3 * p["ff"])
    # the base weights are still all there, and the activations nearly all
    assert lora.peak.by_category["parameters"] > base.peak.by_category["parameters"]
    ratio = lora.peak.by_category["activations"] / base.peak.by_category["activations"]
    assert 0.85 < ratio < 1.0
    assert ckpt.peak.bytes < lora.peak.bytes < base.peak.bytes
    if mode == "cpu":  # same step, same loss (B starts at zero: LoRA's output is the base's)
        assert lora.metrics["loss_first"] == pytest.approx(base.metrics["loss_first"], rel=1e-6)


@pytest.mark.skipif(not HAS_PEFT, reason="needs peft")
def test_19_fake_parameters_move_as_a_no_op():
    # peft's adapter move is a no-op for real tensors and must stay one for fake ones
    from torch._subclasses.fake_tensor import FakeTensorMode

    no_op = _module("15").no_op_moves_for_fake_parameters
    with FakeTensorMode(allow_non_fake_inputs=True):
        lin = torch.nn.Linear(4, 4)
        with pytest.raises(RuntimeError):
            lin.to("cpu", dtype=torch.float32)
        with no_op():
            assert lin.to("cpu", dtype=torch.float32) is lin
        assert torch.nn.Module.to is not None


# ---- lesson 14: optimizers -----------------------------------------------------------------------
def test_20_bf16_state_is_adamw_within_bf16_rounding():
    AdamWBf16State = _module("14").AdamWBf16State
    torch.manual_seed(0)
    a, b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)
    b.load_state_dict(a.state_dict())
    ref = torch.optim.AdamW(a.parameters(), lr=1e-2, weight_decay=0.1)
    mine = AdamWBf16State(b.parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(3):
        x = torch.randn(8, 32)
        for m, opt in ((a, ref), (b, mine)):
            opt.zero_grad()
            m(x).square().mean().backward()
            opt.step()
    assert torch.allclose(a.weight, b.weight, atol=1e-3)
    assert all(v.dtype == torch.bfloat16 for s in mine.state.values()
               for v in s.values() if isinstance(v, torch.Tensor))


LESSON20 = ["baseline", "adamw_8bit", "adafactor", "bf16_state", "fused_backward"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", LESSON20)
def test_20_state_matches_its_formula_in_cpu(variant):
    if variant == "adamw_8bit" and not HAS_TORCHAO:
        pytest.skip("needs torchao")
    res = measured("14", variant)
    assert res.status == "ok", res.error
    (expected, got), = checks(res).values()
    assert got == expected  # step counters included: exact off CUDA (lesson.toml says why)
    assert res.metrics["state_bytes"] == got  # the walk of opt.state agrees with the tracker


@pytest.mark.slow
def test_20_stepping_inside_backward_never_holds_every_gradient():
    base, fused = measured("14", "baseline"), measured("14", "fused_backward")
    assert base.status == fused.status == "ok"
    assert fused.peak.bytes < base.peak.bytes
    assert fused.peak.by_category.get("gradients", 0) < base.peak.by_category["gradients"]
    assert not any(ph.name.startswith("step") for ph in fused.phases)
    assert fused.metrics["loss_first"] == pytest.approx(base.metrics["loss_first"], rel=1e-6)


@pytest.mark.slow
def test_20_adafactor_runs_in_sim_on_stand_in_values_and_says_so():
    # Adafactor reads .item() only for its step size: sim answers stand-ins inside the step and
    # the state is the formula's, as in cpu mode; the result says which values were stand-ins
    res = measured("14", "adafactor", "sim", SCALE["sim"])
    assert res.status == "ok", res.error
    (expected, got), = checks(res).values()
    assert got == expected
    assert any("stand-in" in n and "Adafactor" in n for n in res.notes)


def test_outside_stand_in_values_item_of_a_fake_tensor_still_fails():
    # Given sim's policy, when .item() of a fake tensor is asked outside stand_in_values, then
    # it fails as FakeTensorMode makes it (a value sim does not have is never made up); inside,
    # it answers 1.0, and a real constant still answers its own value
    from torch._subclasses.fake_tensor import FakeTensorMode

    from lab.measure.sim.dispatch.policy import CudaPaths

    policy = CudaPaths()
    real = torch.tensor(3.0)
    with FakeTensorMode() as fake_mode, policy, TensorTracker(policy=policy):
        t = torch.ones(3).sum()
        with pytest.raises(Exception):
            t.item()
        with policy.stand_in_values():
            assert t.item() == 1.0
            assert fake_mode.from_tensor(real) is not None
            assert real.item() == 3.0
        with pytest.raises(Exception):
            t.item()


def test_real_values_makes_a_constant_with_values_in_sim_and_changes_nothing_elsewhere():
    # torchao's quantization map is computed with .tolist() (lesson 14): inside run.real_values()
    # sim makes real tensors; cuda_kernels is the mode's fact (a GPU, or sim standing for one)
    from lab.measure.session import Session

    for mode, kernels in (("sim", True), ("cpu", False)):
        run = Session.for_mode(mode)
        assert run.cuda_kernels is kernels
        with run.backend.running():
            if mode == "sim":  # outside, a tensor has no values
                with pytest.raises(Exception):
                    torch.arange(4.0).tolist()
            with run.real_values():
                assert torch.arange(4.0).tolist() == [0.0, 1.0, 2.0, 3.0]


# ---- lesson 16: the KV cache ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["cpu", "sim"])
def test_21_the_cache_is_the_formula_and_static_does_not_churn(mode):
    scale = SCALE[mode]
    base, static, mha = (measured("16", v, mode, scale) for v in ("baseline", "static", "mha"))
    assert base.status == static.status == mha.status == "ok", (base.error, static.error, mha.error)
    for res in (base, static, mha):
        for expected, got in checks(res).values():
            assert got == expected
        assert res.metrics["kv_cache_bytes"] == next(
            got for name, (_, got) in checks(res).items() if name.startswith("KV cache"))
    p = LESSONS["16"].params(scale)
    assert mha.metrics["kv_cache_bytes"] == base.metrics["kv_cache_bytes"] * p["heads"] // p["kv_heads"]
    assert static.metrics["decode_allocated_bytes"] < base.metrics["decode_allocated_bytes"]
    assert static.peak.bytes > base.peak.bytes  # room for every generated token from the start
    assert base.metrics["cache_tokens"] == p["prompt"] + p["new_tokens"]


def test_21_preallocated_cache_attends_like_the_dynamic_one():
    # Given the same model and prompt, when decoding with the preallocated cache and with
    # transformers' DynamicCache, then every step picks the same tokens (the logits agree)
    from dataclasses import replace

    from transformers import DynamicCache

    from lab.workloads.models import build_model
    from lab.workloads.registry import layout

    mod = _module("16")
    lay = replace(layout("qwen2-1.5b"), n_layer=2, n_embd=64, d_ff=128, n_head=4, n_kv_head=2,
                  vocab_size=128)
    torch.manual_seed(0)
    model = build_model(lay, "cpu").eval()
    prompt = torch.randint(0, 128, (2, 8))
    outs = []
    for cache in (DynamicCache(), mod.preallocated_cache(2, 8 + 4)):
        logits = []
        with torch.inference_mode():
            out = model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            for _ in range(4):
                token = out.logits[:, -1].argmax(-1, keepdim=True)
                logits.append(out.logits[:, -1])
                out = model(input_ids=token, past_key_values=cache, use_cache=True, logits_to_keep=1)
        outs.append(torch.stack(logits))
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
