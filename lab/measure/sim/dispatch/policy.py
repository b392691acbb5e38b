"""CUDA's code paths for sim: what the tensor tracker asks while fake tensors run.

Simulation runs the same experiment code under `FakeTensorMode`, taking CUDA's code paths.

Fake tensors carry shapes, dtypes and storages of the right size but no data, so a 2 GB
`nn.Linear` or a 1.5B-parameter model "runs" in seconds on a laptop and the tracker counts exact
bytes. The fake device is the CPU (fake CUDA tensors crash the process in SDPA's device guard),
so where CUDA and the CPU take different paths that change memory, sim takes CUDA's:

- autocast: CUDA autocast's op lists and weight-cast cache (lab.measure.sim.kernels.autocast);
- attention: the SDPA backend CUDA picks and the tensors it saves (lab.measure.sim.kernels.sdpa;
  the math backend's real-tensor branch and CUDA's `_safe_softmax`: kernels.sdpa_math), and no
  materialised mask where transformers would see real, unpadded data
  (lab.measure.sim.dispatch.fake_values);
- backward: where sim stands for a run without memlab's tracker (`memlab fit`), gradients of a
  tensor used twice summed in place in the engine's input buffer, as on real tensors
  (lab.measure.sim.kernels.grad_accumulate);
- MoE routing and experts: CUDA's rules for `histc` on integers and `_grouped_mm` in fp32/fp16,
  where the meta kernels answer as the CPU would (lab.measure.sim.kernels.meta_rules);
- dropout: CUDA's fused kernel with its bool mask, not the CPU's noise tensor in the input's
  dtype (lab.measure.sim.kernels.dropout);
- optimizers left at PyTorch's default: the foreach implementation CUDA picks, with its
  all-parameter `_foreach_*` intermediates, not the CPU's per-parameter loop
  (lab.measure.sim.kernels.optim);
- allocations that back no tensor: attention kernels' scratch (taken and given back inside the
  op, sized as measured on the H200); the staging buffer and semaphores of long CUDA reductions
  (lab.measure.sim.kernels.reduce, a port of Reduce.cuh's launch configuration); one cuBLAS
  workspace (32 MiB on Hopper: the GPU's row in lab.measure.sim.gpus) per thread that runs a matmul
  (the main thread, and autograd's device thread in backward), one cuBLASLt workspace
  (1 MiB) per thread that runs an addmm with a bias (at::cuda::getCurrentCUDABlasHandle,
  getCUDABlasLtWorkspace in aten/src/ATen/cuda/CublasHandlePool.cpp); cuDNN's convolution
  workspaces, the plan's every call and the benchmark search's at a shape's first call
  (lab.measure.sim.kernels.cudnn_conv);
- the caching allocator: a model (lab.measure.sim.allocator.model) places every allocation in
  segments as it happens, so sim predicts max_memory_allocated / max_memory_reserved and raises
  out-of-memory where the GPU would under the same cap.

The tracker consumes a `TrackerPolicy` (lab.measure.tracker); `CudaPaths` is sim's, and its
`answer` is sim's fast path through the fake mode's dispatch cache
(lab.measure.sim.dispatch.fake_mode.cached_answer).
Which torch/transformers versions these paths were checked on: lab.measure.sim.versions.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from ...torch_compat import current_graph_task_id, storage_key
from ...tracker import ExtraAllocations
from ..gpus import H200, Gpu
from ..kernels import cudnn_conv
from ..kernels.autocast import CudaAutocast
from ..kernels.dropout import CudaDropout
from ..kernels.grad_accumulate import AccumulateInPlace
from ..kernels.meta_rules import CudaMetaRules
from ..kernels.offload import CudaOffload
from ..kernels.optim import CudaOptimDefaults
from ..kernels.reduce import OPS as _REDUCTIONS, op_staging
from ..kernels.sdpa import CudaSdpa, scratch_bytes
from ..kernels.sdpa_math import safe_softmax
from .fake_mode import cached_answer
from .fake_values import LOCAL_SCALAR, ValueAssumptions, stand_in_scalar

_A = torch.ops.aten
_BLAS = {_A.mm.default, _A.addmm.default, _A.bmm.default, _A.baddbmm.default, _A.addbmm.default,
         _A.addmv.default, _A.mv.default, _A.dot.default, _A.vdot.default,
         _A._addmm_activation.default}
# ops whose CUDA kernels take scratch memory from the caching allocator
# (lab.measure.sim.kernels.sdpa)
_SCRATCH = {_A._scaled_dot_product_cudnn_attention.default,
            _A._scaled_dot_product_cudnn_attention_backward.default,
            _A._scaled_dot_product_efficient_attention_backward.default}
_LT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _uses_cublaslt(func, args, kwargs) -> bool:
    """addmm with a 1-D bias takes cuBLASLt's fused-bias path (isInputCompliesAddmmCudaLt)."""
    if func not in (_A.addmm.default, _A._addmm_activation.default):
        return False
    bias, m1, m2 = args[:3]
    beta = kwargs.get("beta", args[3] if len(args) > 3 else 1)
    return (bias.dim() == 1 and bias.size(0) == m2.size(1) and bias.is_contiguous() and beta == 1
            and min(m1.size(0), m1.size(1), m2.size(0), m2.size(1)) > 1
            and m1.dtype in _LT_DTYPES)


_CUDNN_ATTENTION = torch.ops.aten._scaled_dot_product_cudnn_attention.default
_SOFTMAX_BACKWARD = torch.ops.aten._softmax_backward_data.default
_AFTER_OPS = frozenset({_SOFTMAX_BACKWARD, *_SCRATCH, *_REDUCTIONS, *_BLAS,  # what `after` reads
                        *cudnn_conv.OPS})
# measured with bench/profile_vs_h200.py: pytorch/examples word_language_model's LSTM (script/wlm/lstm)
RNN_NOT_MODELLED = ("an RNN (nn.LSTM / GRU / RNN) ran: on CUDA it runs cuDNN's RNN kernels, whose "
                    "workspace and reserve space sim does not model, so the prediction is low "
                    "(pytorch/examples word_language_model's LSTM: sim 19 % below the H200's max "
                    "allocated and 30 % below its max reserved)")


def _arg(args, kwargs, index: int, name: str, default):
    return args[index] if len(args) > index else kwargs.get(name, default)


class _Rerouted:
    """The ops the tracker hands to `CudaPaths.reroute`: a fixed set, and backward's gradient
    accumulations (lab.measure.sim.kernels.grad_accumulate), which only the moment tells apart."""

    def __init__(self, ops: set, accumulate: AccumulateInPlace):
        self.ops, self.accumulate = ops, accumulate

    def __contains__(self, func) -> bool:
        return func in self.ops or self.accumulate.rerouted(func)


class CudaPaths:
    """The tracker's policy in sim (lab.measure.tracker.TrackerPolicy): plain cache hits of the
    fake mode answered directly, which ops to reroute, what CUDA allocates beside the tensors, on
    the GPU of `gpu` (a row of lab.measure.sim.gpus). A context manager: on entry, CUDA's
    autocast, attention, dropout and optimizer defaults go in (lab.measure.sim.kernels)."""

    def __init__(self, tracked: bool = True, gpu: Gpu = H200):
        self.gpu = gpu
        self.answer = cached_answer  # the tracker calls it on every op: a plain function
        # tracked: the CUDA run this stands for has memlab's tracker (a TorchDispatchMode) on, as
        # cuda mode and the lessons' recordings do; ATen then takes its tensor-subclass branches
        # on CUDA too. False: a plain run (`memlab fit`): real tensors' in-place branches
        self.tracked = tracked
        self.sdpa = CudaSdpa(tracked=tracked)
        self.autocast = CudaAutocast()
        self.dropout = CudaDropout()
        self.optim = CudaOptimDefaults()
        self.meta_rules = CudaMetaRules()  # histc on integers, _grouped_mm in fp32/fp16
        self.accumulate = AccumulateInPlace(active=not tracked)
        # _safe_softmax: FakeTensor runs it whole; CUDA's kernel makes (and frees) its parts
        self.rerouted = _Rerouted({_A.scaled_dot_product_attention.default,
                                   _A._safe_softmax.default}, self.accumulate)
        self.workspaces: set[tuple[str, str]] = set()
        self._safe_softmax_outputs: set[int] = set()  # storages _safe_softmax made (its saved result)
        self.unmodelled: set[str] = set()  # what this run did that sim does not model (notes)
        self.values = ValueAssumptions()
        self.convolutions = cudnn_conv.CudnnConvolutions()  # cuDNN's workspaces, its search
        self.offload = CudaOffload()  # save_on_cpu: saved tensors leave the device, pinned host
        # the workspaces a thread's first matmul takes on this GPU (CublasHandlePool.cpp)
        self._workspace_bytes = {"cublas": gpu.cublas_workspace_bytes,
                                 "cublaslt": gpu.cublaslt_workspace_bytes}

    def reroute(self, func, args, kwargs):
        if func is LOCAL_SCALAR:
            return stand_in_scalar(args[0])
        if func is _A._safe_softmax.default:
            out = safe_softmax(*args, **kwargs)
            self._safe_softmax_outputs.add(storage_key(out.untyped_storage()))
            return out
        if func is _A.add.Tensor:
            return self.accumulate.take(args, kwargs)
        return self.sdpa.reroute(func, args, kwargs)

    @contextmanager
    def stand_in_values(self):
        """`.item()` of a fake tensor answers a stand-in meanwhile
        (lab.measure.sim.dispatch.fake_values)."""
        self.rerouted.ops.add(LOCAL_SCALAR)
        try:
            yield
        finally:
            self.rerouted.ops.discard(LOCAL_SCALAR)

    @contextmanager
    def plain_run(self):
        """Stand for a run without memlab's tracker meanwhile (a user's own script, whose
        truth is its own max_memory_allocated): real tensors' in-place branches (see `tracked`).
        The attention kernel reads the choice when installed, so it is installed again."""
        before = self.tracked
        self._set_tracked(False)
        try:
            yield
        finally:
            self._set_tracked(before)

    def _set_tracked(self, tracked: bool) -> None:
        self.tracked = tracked
        self.accumulate.active = not tracked
        if self.sdpa.tracked != tracked:
            installed = self.sdpa._lib is not None
            if installed:
                self.sdpa.uninstall()
            self.sdpa.tracked = tracked
            if installed:
                self.sdpa.install()

    def unmade_outputs(self, func, args, kwargs, out) -> tuple:
        """Outputs the op's fake kernel makes and CUDA's does not: cuDNN attention's logsumexp
        when none is asked for (inference: run_cudnn_SDP_fprop allocates softmax stats only to
        return them; the meta kernel always does). Seen on the H200 as 2 allocator events per
        layer fewer than sim made, and a 1.5 MB block that split a cached one (lesson 16)."""
        if func is _CUDNN_ATTENTION and not _arg(args, kwargs, 4, "compute_log_sumexp", True):
            return (out[1],)
        return ()

    def after(self, func, args, kwargs, out, sink: ExtraAllocations) -> None:
        if not self.values.active:
            self.values.maybe_patch()
            self.offload.maybe_patch()
        if func not in _AFTER_OPS:  # one set lookup for the ~95 % of ops none of the below takes
            return
        if func is _SOFTMAX_BACKWARD and self._safe_softmax_outputs:
            saved = args[1]
            if storage_key(saved.untyped_storage()) in self._safe_softmax_outputs:
                # SafeSoftmaxBackward0 on CUDA: the H200's traces show one more output-sized
                # block born and freed beside _softmax_backward_data's result (falcon-7b bf16,
                # every layer; lesson 05's math variants), which the CPU kernel does not make
                sink.extra_transient(("safe_softmax_backward", "grad"), out.untyped_storage().nbytes())
            return
        if func in _SCRATCH:
            n = scratch_bytes(func, args)
            if n:
                sink.extra_transient(("scratch", func.__name__), n)
            return
        if func in cudnn_conv.OPS:
            for step in self.convolutions.transients(func, args, kwargs, out):
                if step.nbytes:
                    sink.extra_transient(step.key, step.nbytes)
                if step.then_empty_cache:
                    sink.library_empty_cache()
            return
        if func in _REDUCTIONS:
            # a long reduction split across thread blocks: staging buffer + semaphores
            buffer, semaphores = op_staging(func, args, kwargs, out, self.gpu)
            if buffer:
                sink.extra_transients([(("reduce", "buffer"), buffer),
                                          (("reduce", "semaphores"), semaphores)])
            return
        if func not in _BLAS:
            return
        # autograd runs CUDA backward on its own device thread: its own cuBLAS handle/workspace
        thread = "autograd" if current_graph_task_id() != -1 else "main"
        need = ["cublas"] + (["cublaslt"] if _uses_cublaslt(func, args, kwargs) else [])
        for lib in need:
            key = (lib, thread)
            if key not in self.workspaces:
                self.workspaces.add(key)
                sink.extra_alloc(key, self._workspace_bytes[lib])

    def __enter__(self):
        self.autocast.install()
        self.sdpa.install()
        self.dropout.install()
        self.optim.install()
        self.meta_rules.install()
        self.values.maybe_patch()  # now if transformers is imported, else at the first op after
        self.offload.install()
        self._rnn_hook = torch.nn.modules.module.register_module_forward_pre_hook(self._saw_module)
        return self

    def _saw_module(self, module, args) -> None:
        if isinstance(module, torch.nn.RNNBase):
            self.unmodelled.add(RNN_NOT_MODELLED)

    def __exit__(self, *exc):
        self._rnn_hook.remove()
        self.offload.uninstall()
        self.values.restore()
        self.meta_rules.uninstall()
        self.optim.uninstall()
        self.dropout.uninstall()
        self.sdpa.uninstall()
        self.autocast.uninstall()


__all__ = ["CudaPaths"]
