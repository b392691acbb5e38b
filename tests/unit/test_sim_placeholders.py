"""A model a script builds on the host holds no values in sim (lab.measure.sim.facade.placeholders):
its weights are placeholders of their shape and dtype, initialisers cost nothing, the GPU copy is
counted as the GPU's, and what needs a weight's values is refused in one line."""

from __future__ import annotations

import pytest
import torch

from lab.measure.sim.facade.placeholders import PLACEHOLDER_MIN, HostPlaceholders
from lab.profile.run import finish, parse_command


def _profile(script, *args):
    """What the worker does for `memlab profile --mode sim --gpu h100`, in this process."""
    from lab.profile import script as experiment
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    params = {"target": str(script), "module": False, "args": list(args), "timeout_s": 0,
              "output_path": None, "steps": None, "gpu": "h100"}
    req = RunRequest("profile", "script", "sim", "", kind="profile", experiment=experiment.__file__,
                     params=params, gpu="h100", timing=False)
    r = measure_request(req, experiment.script)
    return finish(r, parse_command(["python", str(script), *args]), [], 0)


def _note(r, text: str) -> str:
    found = [n for n in r.notes if text in n]
    assert found, f"no note with {text!r} in {r.notes}"
    return found[0]


def test_a_modules_parameters_become_placeholders_and_small_buffers_stay_real():
    with HostPlaceholders() as made:
        lin = torch.nn.Linear(512, 256)
        norm = torch.nn.BatchNorm1d(256)  # running stats: small buffers, control flow's
        torch.nn.init.kaiming_uniform_(lin.weight)  # on meta: no values, no cost
        lin.register_buffer("table", torch.zeros(PLACEHOLDER_MIN))
    assert lin.weight.is_meta and lin.bias.is_meta and norm.weight.is_meta
    assert isinstance(lin.weight, torch.nn.Parameter) and lin.weight.requires_grad
    assert (lin.weight.shape, lin.weight.dtype) == ((256, 512), torch.float32)
    assert not norm.running_mean.is_meta and lin.table.is_meta
    assert (made.parameters, made.buffers) == (4, 1)
    assert made.nbytes == (512 * 256 + 256 + 2 * 256 + PLACEHOLDER_MIN) * 4
    assert "4 parameters and 1 buffer" in made.note()
    # outside sim, modules are built as torch builds them
    assert not torch.nn.Linear(4, 4).weight.is_meta


SCRIPT = '''\
import torch
model = torch.nn.Sequential(torch.nn.Linear(2048, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 8))
torch.nn.init.normal_(model[0].weight, std=0.02)
assert model[0].weight.device.type == "cpu"  # the script sees a host tensor
print("parameters", sum(p.numel() for p in model.parameters()))
model = model.cuda()
print("on the gpu", torch.cuda.memory_allocated())
x = torch.randn(4, 2048, device="cuda")
model(x).sum().backward()
'''


def test_a_script_builds_its_model_without_values_and_the_gpu_counts_its_copy(tmp_path):
    script = tmp_path / "build.py"
    script.write_text(SCRIPT)
    r = _profile(script)
    assert r.status == "ok", r.error
    weights = (2048 * 2048 + 2048 + 2048 * 8 + 8) * 4
    assert r.allocator.peak_allocated_bytes >= 2 * weights  # weights, then their grads
    assert "4 parameters" in _note(r, "placeholder")


def test_a_host_op_that_needs_a_weights_values_is_refused_in_one_line(tmp_path):
    script = tmp_path / "mask.py"
    script.write_text("import torch\nlin = torch.nn.Linear(64, 64)\n"
                      "big = lin.weight[lin.weight > 0]\n")
    r = _profile(script)
    assert r.status == "error"
    assert "mask.py:3" in r.error and "placeholder" in r.error and "\n" not in r.error.strip()
