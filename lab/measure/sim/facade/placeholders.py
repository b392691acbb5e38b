"""Weights without values: a model a script builds on the host is made of placeholders in sim.

A script builds its model on the host and moves it (`from_config(cfg).to("cuda")`). Real host
weights would cost what the GPU holds, in this machine's memory and in random initialisation
time (an 8 B layout: 32 GB of fp32 and minutes of `normal_`), for values sim never reads. So:

    THE RULE. A parameter a module registers on the host, and a buffer of PLACEHOLDER_MIN
    elements or more, is a *placeholder*: a meta tensor with its shape, dtype and strides and no
    memory. Initialisers on it (`normal_`, `kaiming_uniform_`, transformers' `_init_weights`)
    cost nothing; `.to("cuda")` / `.cuda()` make its GPU copy, which sim counts as the GPU
    would. Everything else the script makes on the host stays real: data read from disk or
    numpy, token ids, masks, a batch of random numbers, small buffers (rotary frequencies), so
    control flow on them runs as it would.

The parameter is caught when its module registers it (torch's global registration hooks, a
public API), after its factory made it: `torch.empty` reserves pages the placeholder frees
untouched; a `Parameter(torch.randn(...))` is made once, then dropped. A host op on a placeholder
runs on meta (real tensors beside it are taken as meta too): shapes are checked, the result is a
placeholder; a value read of one answers a stand-in, and an op that needs its values (a boolean
mask, `nonzero`) is refused in one line naming the site (lab.measure.sim.facade.placement).
"""

from __future__ import annotations

import torch

from ... import torch_compat
from ...torch_compat import FakeTensor

PLACEHOLDER_MIN = 1 << 16  # elements: a buffer this large is the model's, not control flow's
_META = torch.device("meta")


def _real_host(t) -> bool:
    return (isinstance(t, torch.Tensor) and not isinstance(t, FakeTensor)
            and t.device.type == "cpu" and t.layout == torch.strided)


def placeholder(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor of `t`'s shape, strides and dtype (no memory)."""
    with torch_compat.disable_current_modes():
        return torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=_META)


class HostPlaceholders:
    """While on: the registration hooks that turn a host model's weights into placeholders, and
    what was turned (for the result's note)."""

    def __init__(self):
        self.parameters = 0
        self.buffers = 0
        self.nbytes = 0
        self._handles: list = []

    def __enter__(self) -> HostPlaceholders:
        mod = torch.nn.modules.module
        self._handles = [mod.register_module_parameter_registration_hook(self._on_parameter),
                         mod.register_module_buffer_registration_hook(self._on_buffer)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _on_parameter(self, module, name, param):
        # a Parameter subclass (a quantised or lazy one) has its own making: left as it is
        if type(param) is not torch.nn.Parameter or not _real_host(param):
            return None
        self.parameters += 1
        self.nbytes += param.numel() * param.element_size()
        return torch.nn.Parameter(placeholder(param), requires_grad=param.requires_grad)

    def _on_buffer(self, module, name, buffer):
        if type(buffer) is not torch.Tensor or not _real_host(buffer) \
                or buffer.numel() < PLACEHOLDER_MIN:
            return None
        self.buffers += 1
        self.nbytes += buffer.numel() * buffer.element_size()
        return placeholder(buffer)

    def note(self) -> str | None:
        if not self.parameters and not self.buffers:
            return None
        what = f"{self.parameters:,} parameter{'s' if self.parameters != 1 else ''}"
        if self.buffers:
            what += f" and {self.buffers:,} buffer{'s' if self.buffers != 1 else ''}"
        return (f"the model built on the host ({what}, {self.nbytes / 1e9:.2f} GB) held no "
                "values in sim: each weight is a placeholder of its shape and dtype, its "
                "initialisation cost nothing, and its GPU copy is counted as the GPU's")


__all__ = ["HostPlaceholders", "PLACEHOLDER_MIN", "placeholder"]
