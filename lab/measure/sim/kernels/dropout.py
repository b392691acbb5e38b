"""`dropout` as CUDA runs it, on sim's CPU-device fake tensors.

`aten::dropout` is a composite op that chooses by device (aten/src/ATen/native/Dropout.cpp):
on CUDA, in training with 0 < p < 1, it calls the fused `native_dropout` kernel, which returns
the output and a **bool** mask (1 byte per element) that autograd saves for backward; on the
CPU it draws a noise tensor in the input's dtype (`empty_like(input).bernoulli_(1 - p)`,
`div_(1 - p)`) and multiplies, and autograd saves that noise (4 bytes per element in fp32). A
model with dropout (GPT-2's configs: 0.1 on embeddings, residuals and attention weights) would
keep 4x the mask bytes in sim. Installed as the AutogradCPU kernel of `aten::dropout`, as
lab.measure.sim.kernels.sdpa does for attention, so autograd records CUDA's op. The in-place
`dropout_` takes the noise path on CUDA too and is left alone.
"""

from __future__ import annotations

import warnings

import torch


def dropout(input, p: float, train: bool):
    """What `at::native::dropout` does when the input is on CUDA."""
    if train and 0 < p < 1 and input.numel() > 0:
        return torch.ops.aten.native_dropout(input, p, train)[0]
    if p == 0 or not train or input.numel() == 0:
        return input
    return input * torch.zeros((), dtype=input.dtype, device=input.device)  # p == 1


class CudaDropout:
    """While installed, autograd-visible dropout calls take CUDA's fused kernel."""

    def __init__(self):
        self._lib = None

    def install(self) -> None:
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            self._lib.impl("dropout", dropout, "AutogradCPU")

    def uninstall(self) -> None:
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
