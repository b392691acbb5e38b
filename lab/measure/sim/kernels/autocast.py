"""CUDA autocast's choices, applied to sim's CPU-device fake tensors.

Sim runs on the `cpu` device, so `torch.autocast(device_type="cpu", ...)` is what turns on, and CPU
autocast casts differently from CUDA autocast: e.g. `pow` (GPT-2's `gelu_new`) and `layer_norm`
run in fp32 under CUDA autocast, in the input's dtype under CPU autocast; `cat`/`stack` promote on
CPU, not on CUDA; `cross_entropy_loss` is an fp32 op on CPU only. Those choices decide which
tensors exist and what autograd saves, so they decide the memory.

`install()` registers, for the AutocastCPU dispatch key, a Python kernel for every op that either
autocast has a kernel for: the kernel applies CUDA's policy (the op lists of
aten/src/ATen/autocast_mode.h; which of them CUDA autocast handles is read from the running
torch's AutocastCUDA registrations - torch 2.13 adds rms_norm, which 2.11 leaves alone):

  lower_precision_fp   cast floating args to the autocast dtype; fp32 leaf weights that need a
                       gradient are cast once and the copy is cached until the outermost
                       autocast region exits (also under no_grad)
  fp32                 cast floating args to fp32
  fp32_set_opt_dtype   run with dtype=float32 unless a dtype was given (softmax, sum, ...)
  fp32_append_dtype    norm: run norm(..., dtype=float32)
  promote              cast to the widest floating type among the args
  (none)               a fallthrough: ops CPU autocast handles but CUDA autocast does not

Casts run right to left over the arguments, as the compiled C++ wrapper evaluates them (seen in
the order of the weight/bias/input copies). The kernels exist only while installed (sim runs).
"""

from __future__ import annotations

import warnings
import weakref

import torch

from ...torch_compat import aten_ops_with_kernel, exclude_autocast_cpu, has_kernel_for, op_schema

LOWER, FP32, SET_DTYPE, APPEND_DTYPE, PROMOTE, BANNED, NONE = (
    "lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote", "banned", "none")

_LOWER = """_convolution.deprecated _convolution conv1d conv2d conv3d conv_tbc conv_transpose1d
conv_transpose2d.input conv_transpose3d.input convolution prelu addmm addmv addr matmul einsum mm mv
linalg_vecdot linear addbmm baddbmm bmm chain_matmul linalg_multi_dot _thnn_fused_lstm_cell
_thnn_fused_gru_cell lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell _scaled_dot_product_flash_attention
scaled_dot_product_attention cudnn_convolution cudnn_convolution_transpose"""
_FP32 = """acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow.Tensor_Scalar
pow.Tensor_Tensor pow.Scalar softplus layer_norm native_layer_norm group_norm frobenius_norm.dim
nuclear_norm nuclear_norm.dim cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss
nll_loss2d hinge_embedding_loss kl_div l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss
multilabel_margin_loss soft_margin_loss triplet_margin_loss multi_margin_loss
binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp upsample_nearest1d
_upsample_nearest_exact1d upsample_nearest2d _upsample_nearest_exact2d upsample_nearest3d
_upsample_nearest_exact3d upsample_linear1d upsample_bilinear2d _upsample_bilinear2d_aa
upsample_trilinear3d upsample_bicubic2d _upsample_bicubic2d_aa rms_norm"""
_SET_DTYPE = """prod prod.dim_int prod.dim_Dimname softmax.int softmax.Dimname log_softmax.int
log_softmax.Dimname cumprod cumprod.dimname cumsum cumsum.dimname linalg_vector_norm linalg_matrix_norm
linalg_matrix_norm.str_ord sum sum.dim_IntList sum.dim_DimnameList"""
_APPEND_DTYPE = "norm.Scalar norm.ScalarOpt_dim norm.names_ScalarOpt_dim"
_PROMOTE = "addcdiv addcmul atan2 bilinear cross dot vdot grid_sampler index_put tensordot scatter_add"

CUDA_POLICY: dict[str, str] = {
    **{n: LOWER for n in _LOWER.split()}, **{n: FP32 for n in _FP32.split()},
    **{n: SET_DTYPE for n in _SET_DTYPE.split()}, **{n: APPEND_DTYPE for n in _APPEND_DTYPE.split()},
    **{n: PROMOTE for n in _PROMOTE.split()}, "binary_cross_entropy": BANNED,
}

_NORM_DTYPE = {"norm.Scalar": "ScalarOpt_dtype", "norm.ScalarOpt_dim": "ScalarOpt_dim_dtype",
               "norm.names_ScalarOpt_dim": "names_ScalarOpt_dim_dtype"}


def _eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


class WeightCastCache:
    """CUDA autocast's cache of lower-precision copies of fp32 leaf weights (cached_cast)."""

    def __init__(self):
        self.casts: dict[int, tuple[weakref.ref, torch.Tensor]] = {}

    def cast(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if not _eligible(t) or t.dtype == dtype:
            return t
        cacheable = (dtype == torch.get_autocast_dtype("cpu") and t.dtype == torch.float32
                     and t.requires_grad and t.is_leaf and not t._is_view()
                     and torch.is_autocast_cache_enabled())
        if not cacheable:
            return t.to(dtype)
        hit = self.casts.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        out = t.to(dtype)
        self.casts[id(t)] = (weakref.ref(t), out)
        return out

    def clear(self) -> None:
        self.casts.clear()


def _cast_args(cache: WeightCastCache, dtype, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    def one(a):
        if isinstance(a, torch.Tensor):
            return cache.cast(a, dtype)
        if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
            return type(a)(reversed([one(x) for x in reversed(a)]))
        return a

    kwargs = {k: one(v) for k, v in reversed(list(kwargs.items()))}
    args = tuple(reversed([one(a) for a in reversed(args)]))
    return args, kwargs


def _flat_tensors(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (x for x in a if isinstance(x, torch.Tensor))


def _make_kernel(op, name: str, policy: str, cache: WeightCastCache):
    dtype_index = next((i for i, a in enumerate(op_schema(op).arguments) if a.name == "dtype"),
                       None)

    def kernel(*args, **kwargs):
        with exclude_autocast_cpu():
            if policy == LOWER:
                args, kwargs = _cast_args(cache, torch.get_autocast_dtype("cpu"), args, kwargs)
            elif policy == FP32:
                args, kwargs = _cast_args(cache, torch.float32, args, kwargs)
            elif policy == PROMOTE:
                to = torch.get_autocast_dtype("cpu")
                for t in _flat_tensors(args, kwargs):
                    if _eligible(t) and torch.float32 in (t.dtype, to):
                        to = torch.float32
                args, kwargs = _cast_args(cache, to, args, kwargs)
            elif policy in (SET_DTYPE, APPEND_DTYPE) and args and _eligible(args[0]):
                if policy == APPEND_DTYPE:
                    norm = getattr(torch.ops.aten.norm, _NORM_DTYPE[name])
                    return norm(*args, **kwargs, dtype=torch.float32)
                if dtype_index is not None and dtype_index < len(args):
                    if args[dtype_index] is None:
                        args = args[:dtype_index] + (torch.float32,) + args[dtype_index + 1:]
                elif kwargs.get("dtype") is None:
                    kwargs = {**kwargs, "dtype": torch.float32}
            elif policy == BANNED:
                raise RuntimeError(
                    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
                    "autocast (CUDA autocast refuses them); use binary_cross_entropy_with_logits")
            return op(*args, **kwargs)

    return kernel


def _overload(name: str):
    base, _, ov = name.partition(".")
    try:
        return getattr(getattr(torch.ops.aten, base), ov or "default")
    except (AttributeError, RuntimeError):
        return None  # not in this torch version


class CudaAutocast:
    """While installed, CPU autocast makes CUDA autocast's choices (see module docstring)."""

    def __init__(self):
        self.cache = WeightCastCache()
        self.skipped: list[str] = []  # ops of the table this torch's CUDA autocast leaves alone
        self._lib = None
        self._orig_clear = None

    def install(self) -> None:
        names = aten_ops_with_kernel("AutocastCPU")
        for name in CUDA_POLICY:
            # the running torch's own AutocastCUDA registrations say which ops CUDA autocast casts
            # in this version (e.g. rms_norm: fp32 from 2.13, untouched in 2.11); CPU-only builds
            # leave out the named-tensor (Dimname) overloads, which CUDA builds register
            if "imname" in name or "names_" in name or has_kernel_for("aten::" + name,
                                                                      "AutocastCUDA"):
                names.add(name)
            else:
                self.skipped.append(name)
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            for name in sorted(names):
                op = _overload(name)
                if op is None:
                    continue
                policy = CUDA_POLICY.get(name, NONE) if name not in self.skipped else NONE
                # NONE: a fallthrough, as CUDA autocast has no kernel: the op's parts still
                # meet autocast (cross_entropy -> log_softmax in fp32, nll_loss in fp32)
                kernel = (torch.library.fallthrough_kernel if policy == NONE
                          else _make_kernel(op, name, policy, self.cache))
                self._lib.impl(name, kernel, "AutocastCPU")
        # the cache lives until the outermost autocast region exits: torch.autocast.__exit__ calls
        # torch.clear_autocast_cache() then (torch/amp/autocast_mode.py)
        self._orig_clear = torch.clear_autocast_cache
        orig, cache = self._orig_clear, self.cache

        def clear_autocast_cache():
            cache.clear()
            orig()

        torch.clear_autocast_cache = clear_autocast_cache

    def uninstall(self) -> None:
        if self._orig_clear is not None:
            torch.clear_autocast_cache = self._orig_clear
            self._orig_clear = None
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
        self.cache.clear()

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.uninstall()
