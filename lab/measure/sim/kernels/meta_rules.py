"""Meta kernels with CUDA's rules, for ops whose meta kernel answers as the CPU would.

Sim's fake tensors live on the CPU device (lab.measure.sim.dispatch.policy says why), and a few of
torch's meta kernels check that device or carry a dtype rule CUDA no longer has, so a script that
runs on the GPU stops in sim. Every modern transformers MoE layout (Qwen3-MoE, Mixtral, OLMoE,
DeepSeek-style, gpt-oss: transformers/integrations/moe.py's grouped-mm experts) meets both:

- `aten::histc` on integer input (tokens per expert, counted on the routing indices): CUDA's
  `_histc_cuda` takes integers and returns `(bins,)` in the input's dtype
  (aten/src/ATen/native/cuda/SummaryOps.cu); the meta kernel refuses what the CPU refuses
  (`"histogram_cpu" not implemented for 'torch.int32'`).
- `aten::_grouped_mm` with fp32 or fp16 inputs: CUDA's `_grouped_mm_cuda` takes them through
  `_grouped_mm_fallback` (a mm per group into the one output) and sizes its output with
  `create_grouped_gemm_output_tensor`, its last dimension padded to 16 bytes, in
  `out_dtype` or the inputs' dtype (aten/src/ATen/native/cuda/GroupedBlas.cpp); the meta kernel
  insists on bf16 and, in a CPU build, makes the output unpadded.

Installed as the Meta kernels of these ops while sim runs (a `torch.library` registration,
as lab.measure.sim.kernels.dropout installs its kernel), so the fake mode runs them; the meta
device's own kernels come back when sim ends.
"""

from __future__ import annotations

import warnings

import torch


def _check(ok: bool, message) -> None:
    if not ok:
        raise RuntimeError(message())


def histc(input, bins: int = 100, min=0, max=0):
    """CUDA's histc: `(bins,)` in the input's dtype, integers accepted."""
    _check(bins > 0, lambda: f"histc(): bins must be > 0, but got {bins}")
    return input.new_empty((bins,))


def grouped_mm_output(mat_a, mat_b, offs=None, out_dtype=None):
    """create_grouped_gemm_output_tensor's shape and strides, in CUDA's output dtype."""
    a_2d, b_2d = mat_a.dim() == 2, mat_b.dim() == 2
    _check(mat_a.dim() in (2, 3) and mat_b.dim() in (2, 3),
                 lambda: "Multiplicands must be 2D or 3D")
    if a_2d and b_2d:
        size = [offs.size(0), mat_a.size(0), mat_b.size(1)]
    elif a_2d:
        size = [mat_a.size(0), mat_b.size(-1)]
    elif b_2d:
        size = [mat_a.size(1), mat_b.size(1)]
    else:
        _check(mat_a.size(0) == mat_b.size(0), lambda: "batched dimension has to match")
        size = [mat_a.size(0), mat_a.size(1), mat_b.size(-1)]
    dtype = out_dtype or mat_a.dtype
    alignment = 16 // dtype.itemsize  # a TMA-friendly row: 16 bytes
    padded = (size[-1] + alignment - 1) // alignment * alignment
    stride = [size[1] * padded, padded, 1] if a_2d == b_2d else [padded, 1]
    return mat_a.new_empty_strided(size, stride, dtype=dtype)


def grouped_mm(mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """CUDA's _grouped_mm, any of bf16 / fp16 / fp32 (the fallback takes what is not bf16)."""
    _check(mat_a.dtype == mat_b.dtype, lambda: "grouped_mm: inputs must share a dtype, "
                 f"got {mat_a.dtype} and {mat_b.dtype}")
    _check(bias is None, lambda: "Bias tensor provided, but it is not supported yet.")
    return grouped_mm_output(mat_a, mat_b, offs, out_dtype)


KERNELS = {"histc": histc, "_grouped_mm": grouped_mm}


class CudaMetaRules:
    """While installed, the ops in KERNELS have CUDA's meta rules (see the module docstring)."""

    def __init__(self):
        self._lib = None

    def install(self) -> None:
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            for name, kernel in KERNELS.items():
                self._lib.impl(name, kernel, "Meta")

    def uninstall(self) -> None:
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None


__all__ = ["CudaMetaRules", "KERNELS", "grouped_mm_output"]
