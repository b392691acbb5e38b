"""`memlab profile --mode sim`: an unmodified CUDA script predicted on a GPU this machine lacks.

The scripts under tests/fixtures/profile/sim/ are written as a CUDA user writes them (`cuda`
devices, `.cuda()`, torch.cuda calls, autocast("cuda")). They run here through the experiment
the worker runs (lab/profile/script.py under measure, in this process), inside the CUDA
facade (lab/measure/sim/facade/cuda_facade.py). Where a script's training loop is also a lab
experiment, the two sim paths must predict the same bytes: the facade only moves the script
onto sim, it adds nothing.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import ModuleType

import pytest

from lab.profile.run import finish, parse_command
from ..stderr_lines import own_lines

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "tests" / "fixtures" / "profile" / "sim"


def _line(path: Path, marker: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1) if marker in text)


def _profile(script: Path, *args, steps=None, gpu=None, gpu_memory=None, output=None):
    """What the worker does for `memlab profile --mode sim`, in this process."""
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure
    from lab.measure.sim.gpus import gpu as card
    from lab.profile import script as experiment

    params = {"target": str(script), "module": False, "args": list(args), "timeout_s": 0,
              "output_path": str(output) if output else None, "steps": steps, "gpu": gpu}
    r = measure(experiment.script,
                VariantSpec("profile", "script", "", params, timing=False),
                backend_for("sim", gpu_memory=gpu_memory, gpu=card(gpu) if gpu else None))
    return finish(r, parse_command(["python", str(script), *args]), [], 0)


def _note(r, text: str) -> str:
    found = [n for n in r.notes if text in n]
    assert found, f"no note with {text!r} in {r.notes}"
    return found[0]


# ---- the facade as a unit --------------------------------------------------------------------

def _snapshot():
    import torch
    import torch.utils._device as device_mod
    from torch.overrides import _get_current_function_mode_stack

    from lab.measure.sim.facade.cuda_facade import owners

    spaces = {name: dict(vars(obj)) for name, obj in owners().items()}
    return spaces, device_mod.CURRENT_DEVICE, len(_get_current_function_mode_stack()), \
        torch.get_default_device()


def test_the_facade_restores_every_attribute_it_intercepts():
    import torch
    from torch.utils.checkpoint import checkpoint

    from lab.measure.sim.allocator.replay import Replay
    from lab.measure.sim.facade.cuda_facade import INTERCEPTED, CudaFacade, owners
    from lab.measure.sim.gpus import gpu

    import torch._dynamo  # noqa: F401  (its import wraps torch.manual_seed; sim imports it anyway)

    before = _snapshot()
    facade = CudaFacade(Replay(series=True), gpu("t4"))
    # Given a script that changes the default device and fails half-way
    with pytest.raises(ValueError):
        with facade:
            spaces = owners()
            for row in INTERCEPTED:  # every row is installed while the facade is on
                if row.name in before[0][row.owner]:
                    assert vars(spaces[row.owner])[row.name] is not \
                        before[0][row.owner][row.name], f"{row.owner}.{row.name}"
            assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (7, 5)
            torch.set_default_device("cuda")
            # checkpoint's recomputation re-enters the default device's context (it then
            # remembers "cuda" as the device to go back to)
            x = torch.randn(4, requires_grad=True)
            checkpoint(torch.sin, x, use_reentrant=False).sum().backward()
            raise ValueError("the script failed")
    # then every namespace the table patches is as before, key by key and object by object
    # (a submodule torch imported meanwhile, torch.cuda._pin_memory_utils, is no patch)
    after = _snapshot()
    for name, space in before[0].items():
        changed = {k for k in space.keys() | after[0][name].keys()
                   if space.get(k, KeyError) is not after[0][name].get(k, KeyError)
                   and not (k not in space and isinstance(after[0][name][k], ModuleType))}
        assert not changed, f"{name}: {sorted(changed)} not restored"
    assert after[1:] == before[1:]  # the default device and the function-mode stack too


def test_the_docs_show_the_table_the_facade_installs_from():
    from lab.measure.sim.facade.cuda_facade import docs_table

    docs = (ROOT / "docs" / "SIMULATION.md").read_text()
    assert docs_table() in docs, ("docs/SIMULATION.md's table of intercepted names differs from "
                                  "lab/measure/sim/facade/cuda_facade.py's; paste docs_table() "
                                  "there")


def test_the_cuda_memory_api_answers_from_the_allocator_model():
    import torch

    from lab.measure.sim.allocator.replay import Replay
    from lab.measure.sim.facade.cuda_facade import CudaFacade
    from lab.measure.sim.gpus import gpu

    replay = Replay(series=True)
    with CudaFacade(replay, gpu("h200")):
        replay.alloc("a", 3 * 2**20)
        replay.alloc("b", 2**20)
        replay.free("a")
        assert torch.cuda.memory_allocated() == replay.model.stats.allocated == 2**20
        assert torch.cuda.max_memory_allocated() == 4 * 2**20
        torch.cuda.reset_peak_memory_stats()  # the script's peak starts again ...
        assert torch.cuda.max_memory_allocated() == 2**20
        stats = torch.cuda.memory_stats()
        assert stats["allocated_bytes.all.current"] == 2**20
        assert stats["reserved_bytes.all.current"] == torch.cuda.memory_reserved()
        free, total = torch.cuda.mem_get_info()
        assert total == gpu("h200").total_bytes and free < total
        torch.cuda.empty_cache()
        torch.cuda.set_per_process_memory_fraction(0.5)
        assert replay.model.cap == gpu("h200").total_bytes // 2
    assert replay.model.stats.peak_allocated == 4 * 2**20  # ... the result's does not


# ---- scripts -----------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_plain_loop_predicts_what_the_lab_experiment_predicts(tmp_path):
    # Given the MLP loop, as a CUDA script and as a lab experiment (memlab run's sim path)
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure

    script = SIM / "mlp_autocast.py"
    train = runpy.run_path(str(script))["train"]

    def experiment(run):
        for _ in train(run.device, run.device.type, 3):
            pass

    lab = measure(experiment, VariantSpec("t", "mlp", "", {}, timing=False), backend_for("sim"))
    out = tmp_path / "out.txt"
    r = _profile(script, output=out)
    assert r.ok and lab.ok, (r.error, lab.error)
    assert r.allocator.predicted
    assert r.allocator.peak_allocated_bytes == lab.allocator.peak_allocated_bytes
    assert r.allocator.peak_reserved_bytes == lab.allocator.peak_reserved_bytes
    assert r.peak.bytes == lab.peak.bytes
    # three optimizer steps (sim's default), a clean stop, a progress line per step
    _note(r, "stopped after 3 optimizer steps")
    printed = out.read_text()
    assert printed.count("\x1fmemlab: step ") == 3
    # the script's own logging printed the prediction (the run's peak is reached by the second
    # step, the first with the momentum buffers alive, which the script logs after it)
    logged = [line for line in printed.splitlines() if line.startswith("step ")]
    assert f"max allocated {r.allocator.peak_allocated_bytes:,} B " in logged[-1], printed
    _note(r, f"mlp_autocast.py:{_line(script, 'VALUE_LINE')} (.item() x")
    assert "NVIDIA H200" in r.device.name and r.device.kind == "sim"


@pytest.mark.slow
def test_a_tiny_gpt2_predicts_what_the_lab_predicts_for_a_plain_run():
    # Given the same GPT-2 loop: the script builds it on the CPU and moves it with .cuda();
    # memlab fit's sim path (a plain run, as a user's script is) builds it on sim's device
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from lab.measure.sim_record import record_sim

    script = SIM / "gpt2_tiny.py"
    ns = runpy.run_path(str(script))

    def experiment(run):
        model = GPT2LMHeadModel(GPT2Config(**ns["CONFIG"])).to(run.device)
        for _ in ns["train"](model, run.device, run.device.type, 3):
            pass

    lab = record_sim(experiment, {})
    r = _profile(script)
    assert r.ok and lab.status == "ok", (r.error, lab.error)
    # One difference, and the script's side is CUDA's: AdamW at its defaults (foreach) keeps
    # each parameter's step count in a host tensor (torch.tensor(0.0) in Adam._init_group),
    # which the lab's experiments, all made on sim's device, count on the GPU: 4 B each, in a
    # 512 B block of its own. The tied head is one parameter, so the model's tensors are:
    model = GPT2LMHeadModel(GPT2Config(**ns["CONFIG"]))
    tensors = list(model.parameters())
    assert r.allocator.peak_allocated_bytes == lab.peak_allocated_bytes - 512 * len(tensors)
    assert r.peak.bytes == lab.tracked_peak_bytes - 4 * len(tensors)
    assert r.allocator.peak_reserved_bytes == lab.peak_reserved_bytes
    # the model built on the host is not the GPU's: the moved copies are, tied ones once
    assert r.phase("model").end_bytes == sum(t.numel() * 4 for t in tensors) + \
        ns["B"] * ns["T"] * 8  # + the input ids (int64)
    del torch


@pytest.mark.slow
def test_what_a_cuda_script_uses_runs_in_sim_and_is_noted(tmp_path):
    # Given the script's 3 batches (3 optimizer steps, then torch.save) and --steps 4
    script = SIM / "cuda_features.py"
    r = _profile(script, steps=4, gpu="a100-40gb")
    assert r.ok, r.error
    assert r.device.name.startswith("NVIDIA A100 40 GB") and "unvalidated" in r.device.name
    _note(r, "unvalidated")
    # torch.compile: the model itself in sim (lab/profile/compiled.py), its caller named
    from lab.profile import compiled

    assert compiled.sites(r) == [f"cuda_features.py:{_line(script, 'COMPILE_LINE')}"]
    assert f"cuda_features.py:{_line(script, 'SAVE_LINE')}: not written" in _note(r, "torch.save")
    assert f"torch.load at cuda_features.py:{_line(script, 'LOAD_LINE')}: what the script's " \
        "torch.save kept" in _note(r, "torch.load at")
    _note(r, "DataLoader(num_workers=2)")
    reads = _note(r, "values read")
    assert f"cuda_features.py:{_line(script, 'VALUE_LINE')} (formatted x3, printed x3)" in reads
    assert f"cuda_features.py:{_line(script, 'DEVICE_LINE')} (is_cuda)" in _note(r, "saw cuda:0")
    # the evaluation loop after each step: 5 passes, of which 4 run (--steps 4)
    assert "evaluation: 3 forward passes" in _note(r, "evaluation:")
    cats = r.peak.by_category
    assert cats["parameters"] == (64 * 512 + 512 + 512 * 8 + 8) * 4  # on the GPU, fp32
    assert cats["optimizer_state"] >= 2 * cats["parameters"]  # fused AdamW's two moments


@pytest.mark.slow
@pytest.mark.parametrize("how, marker, what", [
    ("nonzero", "NONZERO_LINE", "Tensor.nonzero"),
    ("mask", "MASK_LINE", "indexing with a boolean mask"),
])
def test_a_data_dependent_shape_is_refused_in_one_line(how, marker, what):
    script = SIM / "cuda_features.py"
    r = _profile(script, how, steps=2)
    assert r.status == "error" and "\n" not in r.error
    assert r.error.startswith(f"not supported in sim: {what}")
    assert f"at cuda_features.py:{_line(script, marker)} " in r.error


@pytest.mark.slow
def test_out_of_memory_where_the_capped_gpu_would_fail(tmp_path):
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure

    script = SIM / "mlp_autocast.py"
    train = runpy.run_path(str(script))["train"]
    cap = 16 * 2**20  # below the 32 MiB cuBLAS workspace the first matmul takes

    lab = measure(lambda run: [None for _ in train(run.device, "cpu", 3)],
                  VariantSpec("t", "mlp", "", {}, timing=False),
                  backend_for("sim", gpu_memory=cap))
    r = _profile(script, gpu_memory=cap, output=tmp_path / "out.txt")
    assert r.status == lab.status == "oom"
    assert r.error == lab.error and r.error.startswith("CUDA out of memory. Tried to allocate")
    # a result, not a crash: PyTorch's message and the report, no traceback in the output
    assert "Traceback" not in (tmp_path / "out.txt").read_text()
    assert any(n.startswith("out of memory at mlp_autocast.py:") for n in r.notes), r.notes


def test_profiling_is_refused_in_a_served_workshop(capsys, monkeypatch):
    # Given a lab served to browsers: a learner's script would run on the server
    from lab.cli import main
    from lab.serve.policy import SERVED_ENV

    monkeypatch.setenv(SERVED_ENV, "1")
    code = main(["profile", "--mode", "sim", "--", "python", str(SIM / "mlp_autocast.py")])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(own_lines(err)) == 1
    assert "memlab profile (your own script) is off in a lab served to a browser" in err


CONV_SCRIPT = """\
import sys
import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = sys.argv[1] == "on"
model = nn.Conv2d(64, 64, 3, stride=2, padding=1).cuda()  # fp32, channels-first
x = torch.randn(8, 64, 14, 14, device="cuda", requires_grad=True)
for _ in range(2):
    model(x).sum().backward()  # CONV_LINE
"""


SEARCH_EMPTIES_THE_CACHE = """\
import sys
import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = sys.argv[1] == "on"
conv = nn.Conv2d(64, 64, 3, padding=1).cuda()
x = torch.randn(8, 64, 16, 16, device="cuda")  # x, weight and output: small blocks (512 KiB)
scratch = torch.empty(512 * 2**20, dtype=torch.uint8, device="cuda")
del scratch  # a 512 MiB segment, cached and empty; the 1.2 MiB workspaces come and go in it
with torch.no_grad():
    y = conv(x)
"""


def test_the_benchmarks_search_empties_the_allocators_cache(tmp_path):
    # Conv_v8.cpp run_single_conv: emptyCache() after each search ("Replicate v7 behavior");
    # without it sim's ResNet-50 reserved 15 % more than the H100, with it 0.5 % less
    script = tmp_path / "search.py"
    script.write_text(SEARCH_EMPTIES_THE_CACHE)
    on, off = _profile(script, "on", gpu="h100"), _profile(script, "off", gpu="h100")
    assert on.ok and off.ok, (on.error, off.error)
    assert off.allocator.end_reserved_bytes >= 512 * 2**20  # kept for the next request
    assert on.allocator.end_reserved_bytes < 64 * 2**20  # given back after the search
    assert on.allocator.peak_reserved_bytes >= 512 * 2**20  # it was there before
    assert "empties the allocator's cache" in _note(on, "convolutions")


def test_a_script_may_turn_the_emptying_after_a_search_off_in_sim_too(tmp_path):
    # a CUDA-only binding (absent from the CPU build): sim adds it for the run, then removes it
    import torch

    script = tmp_path / "search.py"
    script.write_text(SEARCH_EMPTIES_THE_CACHE.replace(
        'torch.backends.cudnn.benchmark = sys.argv[1] == "on"\n',
        'torch.backends.cudnn.benchmark = sys.argv[1] == "on"\n'
        "torch._C._cudnn_set_conv_benchmark_empty_cache(False)\n"
        "assert torch._C._cuda_get_conv_benchmark_empty_cache() is False\n"))
    had = hasattr(torch._C, "_cudnn_set_conv_benchmark_empty_cache")
    kept = _profile(script, "on", gpu="h100")
    assert kept.ok, kept.error
    assert kept.allocator.end_reserved_bytes >= 512 * 2**20  # no longer given back
    assert "turned off the emptying" in _note(kept, "convolutions")
    assert hasattr(torch._C, "_cudnn_set_conv_benchmark_empty_cache") == had


FITS_BUT_ITS_WORKSPACE_DOES_NOT = """\
import torch
import torch.nn as nn

conv = nn.Conv2d(64, 64, 3, padding=1).cuda()  # fp32, channels-first: a 512 MiB workspace
with torch.no_grad():
    y = conv(torch.randn(16, 64, 256, 256, device="cuda"))  # 256 MiB in, 256 MiB out
print("done")
"""


def test_a_convolution_whose_workspace_does_not_fit_takes_another_plan_not_an_oom(tmp_path):
    # on the GPU, try_plans / try_configs pass over a plan whose workspace can't be had
    script = tmp_path / "tight.py"
    script.write_text(FITS_BUT_ITS_WORKSPACE_DOES_NOT)
    cap = 700 * 2**20
    r = _profile(script, gpu="h100", gpu_memory=cap)
    assert r.ok, r.error
    assert 512 * 2**20 < r.allocator.peak_allocated_bytes <= cap


def test_a_script_that_convolves_takes_cudnns_workspaces(tmp_path):
    """The plan's workspace each call, and with cudnn.benchmark the search's block at the first
    call of each direction: the grad-input's search of a 3x3 stride-2 fp32 convolution is the
    largest (lab.measure.sim.kernels.cudnn_conv), and it makes the run's peak."""
    import torch

    from lab.measure.sim.kernels.cudnn_conv import (GRAD_INPUT, Convolution, plan_workspace,
                                                    search_workspace)

    script = tmp_path / "convolve.py"
    script.write_text(CONV_SCRIPT)
    on, off = _profile(script, "on", gpu="h100"), _profile(script, "off", gpu="h100")
    assert on.ok and off.ok, (on.error, off.error)
    x, y, w = 8 * 64 * 14 * 14 * 4, 8 * 64 * 7 * 7 * 4, 64 * 64 * 9 * 4
    conv = Convolution(GRAD_INPUT, 8, 64, 64, 14, 14, 3, 3, (2, 2), (1, 1), torch.float32,
                       False, x, y, w)
    search, plan = search_workspace(conv), plan_workspace(conv)
    assert search > 10 * plan > 0
    gap = on.allocator.peak_allocated_bytes - off.allocator.peak_allocated_bytes
    assert search - plan - 2**21 <= gap <= search  # 512 B rounding, and which tensors are live
    note = _note(on, "convolutions")
    # 2 steps of one forward and one backward; the site is the script's, not nn.Conv2d's
    assert "(4 calls, the first at " in note
    assert f"convolve.py:{_line(script, 'CONV_LINE')} <module>" in note
    assert "cudnn.benchmark = True" in note and "(3 here)" in note  # forward, grad-input, -weight
    assert "cudnn.benchmark = True" not in _note(off, "convolutions")
