"""Sim takes the optimizer implementation CUDA defaults to (lab.measure.sim.kernels.optim).

`torch.optim.AdamW(params)` picks foreach on CUDA and the per-parameter loop on a CPU; sim's
parameters are CPU fake tensors, so without the policy sim would miss foreach's all-parameter
intermediates (lesson 03's seed_loop_b2 peaked 14 % under the H200 for this reason).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.optim.optimizer import _default_to_fused_or_foreach

from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.measure.sim.dispatch.policy import CudaPaths
from lab.measure.trace import ALLOC, FREE
from lab.measure.tracker import TensorTracker

ROOT = Path(__file__).resolve().parents[2]
# eight equal weights: the loop holds about two parameters' temporaries at a time (sqrt, then
# the division; the last one's until the next replaces it), foreach all eight at once
SIZES = [(256, 256)] * 8


def _model():
    return nn.Sequential(*[nn.Linear(i, o, bias=False) for i, o in SIZES])


def _step_transient(sim: bool, **optim_kw) -> tuple[int, int]:
    """(bytes the second step holds at most beyond what was live before it, the largest
    parameter's bytes); everything is made under the tracker, so nothing is counted twice."""
    with fake_mode(), CudaPaths() if sim else _Nothing(), TensorTracker() as tr:
        model = _model()
        opt = torch.optim.AdamW(model.parameters(), **optim_kw)
        for _ in range(2):  # the first step makes the state; the second shows only temporaries
            model(torch.randn(4, SIZES[0][0])).sum().backward()
            start, live = len(tr.trace.events), 0
            opt.step()
        largest = max(p.numel() * p.element_size() for p in model.parameters())
    peak = 0
    for e in tr.trace.events[start:]:  # the step's own births and deaths
        live += e.nbytes if e.kind == ALLOC else -e.nbytes if e.kind == FREE else 0
        peak = max(peak, live)
    return peak, largest


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _param_bytes() -> int:
    return sum(i * o * 4 for i, o in SIZES)


def test_default_adamw_step_makes_foreach_intermediates_as_on_cuda():
    # foreach: sqrt(exp_avg_sq) for every parameter at once, a list as large as the parameters
    peak, _ = _step_transient(sim=True)
    assert peak == _step_transient(sim=True, foreach=True)[0]
    assert peak >= _param_bytes()


def test_without_the_policy_the_cpu_loop_holds_a_few_parameters_at_a_time():
    # the difference sim must not make: on a CPU the default is the per-parameter loop
    peak, largest = _step_transient(sim=False)
    assert largest <= peak <= 3 * largest < _param_bytes()


def test_an_explicit_choice_is_kept_in_sim():
    loop, _ = _step_transient(sim=True, foreach=False)
    assert loop == _step_transient(sim=False)[0]  # the loop, as asked
    fused, _ = _step_transient(sim=True, fused=True)
    assert fused < _param_bytes()  # one kernel, no parameter-sized intermediates


def test_the_default_is_the_cpus_again_after_sim():
    with fake_mode():
        params = list(_model().parameters())
        with CudaPaths():
            assert _default_to_fused_or_foreach(params, False) == (False, True)
        assert _default_to_fused_or_foreach(params, False) == (False, False)


@pytest.mark.slow  # TorchScript compiles (~5 s on 2 cores)
def test_torchscript_optimizers_compile_inside_sim():
    """torch.distributed.optim's functional optimizers (adagrad, adam, sgd, ...) are TorchScript
    classes compiled at their first import together with the torch.optim functions they call;
    lesson 22's zero1 imports them inside sim, in a fresh interpreter as here. A Python
    replacement for `_default_to_fused_or_foreach` fails right here ("import statements aren't
    supported")."""
    code = ("from lab.measure.sim.dispatch.fake_mode import fake_mode\n"
            "from lab.measure.sim.dispatch.policy import CudaPaths\n"
            "with fake_mode(), CudaPaths():\n"
            "    from torch.distributed.optim import ZeroRedundancyOptimizer\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.slow
def test_lesson_03_default_adamw_loop_peaks_as_on_the_h200():
    """The blog's loop (torch.optim.AdamW with PyTorch's defaults) at batch 2 peaks in the step,
    where foreach's intermediates sit beside gradients and state: within 1 % of the H200."""
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    lesson = next(l for l in load_course().lessons if l.key == "03")
    ref = json.loads((ROOT / "assets" / "reference" / lesson.id / "seed_loop_b2.json").read_text())
    r = measure_request(RunRequest.for_lesson(lesson, "seed_loop_b2", "sim", "seed", timing=False))
    assert r.status == "ok"
    assert abs(r.peak.bytes - ref["peak"]["bytes"]) <= 0.01 * ref["peak"]["bytes"]
    assert r.peak.phase == ref["peak"]["phase"]  # the step, not backward
