"""`scaled_dot_product_attention` as CUDA would run it, on sim's CPU-device fake tensors.

The composite `scaled_dot_product_attention` picks a backend per device. On the CPU it runs the
CPU flash kernel (or math, building a float mask from `is_causal`), which saves other tensors
than the kernel CUDA picks. This module makes the CUDA choice (aten/src/ATen/native/transformers/
cuda/sdp_utils.cpp, `select_sdp_backend`, for an sm90 GPU such as the H200) and calls the same
aten op CUDA would call; those ops' fake kernels return CUDA's outputs and autograd saves what it
saves on CUDA:

  flash      fp16/bf16, no mask, head dim <= 256 (padded to a multiple of 8), grouped-query ok:
             out + fp32 logsumexp (B, H, L) + RNG state
  efficient  fp32/fp16/bf16, masks ok (bool -> float, last dim padded to 16), head dim a multiple
             of 4 (fp32) / 8 (16-bit), q/k/v with the same number of heads:
             out + fp32 logsumexp (B, H, ceil(L/32)*32) when a gradient is needed + seed/offset
  math       anything else (e.g. fp32 with grouped-query attention): matmul, softmax, matmul,
             with k/v repeated per query head; saves the (B, H, L, S) attention weights
             (lab.measure.sim.kernels.sdpa_math: the real-tensor branch, not FakeTensor's)
  cudnn      fp16/bf16 with head dim <= 256 (a multiple of 8), masks and grouped-query ok: out +
             fp32 logsumexp (B, H, L, 1) + seed/offset; first in the order where torch prefers
             it: sm90 with cuDNN > 9.15 (sdp_utils.cpp check_prefer_cudnn_attention), as on the
             H200 that recorded the lessons (torch 2.11+cu130, cuDNN 9.19)

Measured on that H200 (bench/probe_cuda.py, sdpa.json): fp32 -> efficient for every shape and
mask tried, fp32 + grouped-query -> math, fp16/bf16 -> cudnn for every shape, mask and
grouped-query case tried (head dims 64-256, sequences 100-1024).

Installed as the AutogradCPU kernel of `aten::scaled_dot_product_attention` (so autograd records
the chosen op); under inference_mode, where autograd is skipped, the tensor tracker calls
`sdpa()` itself when it meets the composite op.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F

from .sdpa_math import convert_boolean_attn_mask, math_attention

# torch 2.11 + cuDNN 9.19 on an H200 (sm90): cudnn, flash, efficient, math. (Where torch does not
# prefer cuDNN - other GPUs, cuDNN <= 9.15 - the order is flash, efficient, math, cudnn.)
PRIORITY = ("cudnn", "flash", "efficient", "math")
LOW = (torch.float16, torch.bfloat16)


def choose(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False,
           priority: tuple[str, ...] = PRIORITY) -> str:
    # `torch.nn.attention.sdpa_kernel` restricts the choice through these global flags, as it
    # does on CUDA (lesson 05 forces math to show its saved probabilities)
    allowed = {name for name in priority if _ENABLED[name]()}
    for name in priority:
        if name not in allowed:
            continue
        if name == "math" or _OK[name](q, k, v, attn_mask, dropout_p, is_causal, enable_gqa):
            return name
    return "math"


_ENABLED = {
    "cudnn": torch.backends.cuda.cudnn_sdp_enabled,
    "flash": torch.backends.cuda.flash_sdp_enabled,
    "efficient": torch.backends.cuda.mem_efficient_sdp_enabled,
    "math": torch.backends.cuda.math_sdp_enabled,
}


def _dense4(q, k, v) -> bool:
    return q.dim() == k.dim() == v.dim() == 4 and min(q.size(-2), k.size(-2)) > 0


def _flash_ok(q, k, v, mask, dropout_p, is_causal, gqa) -> bool:
    d = q.size(-1)
    if not _dense4(q, k, v) or mask is not None or q.dtype not in LOW:
        return False
    if not (d == k.size(-1) == v.size(-1) and d <= 256):
        return False
    if is_causal and q.size(-2) != k.size(-2):
        return False
    if q.size(1) != k.size(1) and not (gqa and q.size(1) % k.size(1) == 0):
        return False
    return q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1


def _efficient_ok(q, k, v, mask, dropout_p, is_causal, gqa) -> bool:
    align = 8 if q.dtype in LOW else 4
    if not _dense4(q, k, v) or q.dtype not in LOW + (torch.float32,):
        return False
    if q.size(-1) != k.size(-1) or q.size(-1) % align or v.size(-1) % align:
        return False
    if not (q.size(1) == k.size(1) == v.size(1)):
        return False  # no grouped-query attention in the mem-efficient kernel
    return all(t.storage_offset() * t.element_size() % (align * t.element_size()) == 0
               for t in (q, k, v))


def _cudnn_ok(q, k, v, mask, dropout_p, is_causal, gqa) -> bool:
    d = q.size(-1)
    heads_ok = q.size(1) == k.size(1) == v.size(1) or (gqa and q.size(1) % k.size(1) == 0)
    return (_dense4(q, k, v) and q.dtype in LOW and d == k.size(-1) == v.size(-1)
            and d % 8 == 0 and d <= 256 and heads_ok)


_OK = {"flash": _flash_ok, "efficient": _efficient_ok, "cudnn": _cudnn_ok}


# kernel scratch the caching allocator hands out and takes back inside one op (bytes), measured
# on the H200 (sdpa.json: peak during the op - allocated after it)
def scratch_bytes(func, args) -> int:
    name = func.__name__
    if name.startswith("_scaled_dot_product_cudnn_attention_backward"):
        q, k = args[1], args[2]  # (grad_out, query, key, value, ...)
        b, h, l, d = q.shape
        # fp32 dQ accumulator + fp32 (B, H, L) softmax stats; grouped-query: dK, dV per query head
        n = b * h * l * d * 4 + b * h * l * 4
        if k.size(1) != h:
            n += 2 * b * h * k.size(2) * d * q.element_size()
        return n
    if name.startswith("_scaled_dot_product_cudnn_attention"):
        return 512
    if name.startswith("_scaled_dot_product_efficient_attention_backward"):
        q = args[1]
        b, h, l, d = q.shape
        lp = -(-l // 64) * 64  # the kernel's padded sequence and head dims (measured: 64 and
        dp = d if d % 64 == 0 else -(-d // 128) * 128  # 256 exact; 80, 96 within 1 %)
        return b * h * lp * dp * 4 + 2 * b * h * lp * 4
    return 0


def sdpa(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False,
         priority: tuple[str, ...] = PRIORITY, tracked: bool = True):
    """What the composite op does on CUDA, backend by backend (attention.cpp). `tracked`: the
    CUDA run has a dispatch mode on (memlab's tracker), which makes ATen take its tensor-subclass
    branches (lab.measure.sim.kernels.sdpa_math)."""
    backend = choose(q, k, v, attn_mask, dropout_p, is_causal, enable_gqa, priority)
    need_lse = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    aten = torch.ops.aten
    if backend == "cudnn":
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            # convert_boolean_attn_mask_cudnn: where(mask, 0, -inf) in the query's dtype
            zero = torch.zeros((), dtype=q.dtype, device=q.device)
            attn_mask = torch.where(attn_mask, zero, -math.inf)
        return aten._scaled_dot_product_cudnn_attention(
            q, k, v, attn_mask, need_lse, dropout_p, is_causal, False, scale=scale)[0]
    attn_mask = convert_boolean_attn_mask(attn_mask, q.dtype)
    if backend == "flash":
        d = q.size(-1)
        pad = (-d) % 8
        og_scale = scale if scale is not None else 1.0 / math.sqrt(d)
        if pad:
            q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
        out = aten._scaled_dot_product_flash_attention(q, k, v, dropout_p, is_causal, False,
                                                       scale=og_scale)[0]
        return out[..., :d] if pad else out
    if backend == "efficient":
        if attn_mask is not None:
            if attn_mask.size(-1) % 16:  # pad_bias: keep the padded storage, view the old size
                n = attn_mask.size(-1)
                attn_mask = F.pad(attn_mask, (0, 16 - n % 16))[..., :n]
            attn_mask = attn_mask.expand(q.size(0), q.size(1), q.size(2), k.size(2))
        return aten._scaled_dot_product_efficient_attention(
            q, k, v, attn_mask, need_lse, dropout_p, is_causal, scale=scale)[0]
    return math_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                          in_place=not tracked)


class CudaSdpa:
    """While installed, autograd-visible SDPA calls take CUDA's backend."""

    def __init__(self, priority: tuple[str, ...] = PRIORITY, tracked: bool = True):
        self.priority = priority
        self.tracked = tracked
        self._lib = None

    def install(self) -> None:
        prio, tracked = self.priority, self.tracked

        def kernel(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
            return sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, prio,
                        tracked)

        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._lib.impl("scaled_dot_product_attention", kernel, "AutogradCPU")

    def uninstall(self) -> None:
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None

    def reroute(self, func, args, kwargs):
        """For the tensor tracker under inference_mode: the whole composite op, CUDA's way."""
        if func is torch.ops.aten.scaled_dot_product_attention.default:
            return sdpa(*args, **kwargs, priority=self.priority, tracked=self.tracked)
        return NotImplemented
