"""Simulation: the same experiment code under `FakeTensorMode`, taking CUDA's code paths.

Fake tensors carry shapes, dtypes and storages of the right size but no data, so a 2 GB
`nn.Linear` or a 1.5B-parameter model "runs" in seconds on a laptop and the tracker counts exact
bytes. The fake device is the CPU (fake CUDA tensors crash the process in SDPA's device guard),
so where CUDA and the CPU take different paths that change memory, sim takes CUDA's:

- autocast: CUDA autocast's op lists and weight-cast cache (lab.measure.sim.cuda_autocast);
- attention: the SDPA backend CUDA picks and the tensors it saves (lab.measure.sim.cuda_sdpa; the
  math backend's real-tensor branch and CUDA's `_safe_softmax`: cuda_sdpa_math), and
  no materialised mask where transformers would see real, unpadded data (lab.measure.sim.fake_values);
- backward: where sim stands for a run without memlab's tracker (`memlab fit`), gradients of a
  tensor used twice summed in place in the engine's input buffer, as on real tensors
  (lab.measure.sim.grad_accumulate);
- dropout: CUDA's fused kernel with its bool mask, not the CPU's noise tensor in the input's
  dtype (lab.measure.sim.cuda_dropout);
- optimizers left at PyTorch's default: the foreach implementation CUDA picks, with its
  all-parameter `_foreach_*` intermediates, not the CPU's per-parameter loop
  (lab.measure.sim.cuda_optim);
- allocations that back no tensor: attention kernels' scratch (taken and given back inside the
  op, sized as measured on the H200); the staging buffer and semaphores of long CUDA reductions
  (lab.measure.sim.cuda_reduce, a port of Reduce.cuh's launch configuration); one cuBLAS workspace (32 MiB on Hopper) per thread that runs a
  matmul (the main thread, and autograd's device thread in backward), one cuBLASLt workspace
  (1 MiB) per thread that runs an addmm with a bias (at::cuda::getCurrentCUDABlasHandle,
  getCUDABlasLtWorkspace in aten/src/ATen/cuda/CublasHandlePool.cpp);
- the caching allocator: a model (lab.measure.sim.allocator) places every allocation in segments as it
  happens, so sim predicts max_memory_allocated / max_memory_reserved and raises out-of-memory
  where the GPU would under the same cap.

Validated against H200 recordings made with torch 2.11 + transformers 5.x; the CPU build it runs
on here is torch 2.13. Other versions run, with a note (`version_notes`).
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from importlib import metadata
import os

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from .allocator_replay import Replay
from .cuda_autocast import CudaAutocast
from .cuda_dropout import CudaDropout
from .cuda_optim import CudaOptimDefaults
from .cuda_reduce import OPS as _REDUCTIONS, op_staging
from .cuda_sdpa import CudaSdpa, scratch_bytes
from .cuda_sdpa_math import safe_softmax
from .fake_values import LOCAL_SCALAR, ValueAssumptions, stand_in_scalar
from .grad_accumulate import AccumulateInPlace

VALIDATED_TORCH = ("2.11", "2.12", "2.13")  # H200 recordings: 2.11; this emulation's CPU build: 2.13
VALIDATED_TRANSFORMERS_MAJOR = "5"
# what the H200 recordings that judge sim ran (bench/sim_vs_h200.py); model code moves between
# minor versions: Qwen2's rotary embedding is a matmul in 5.17 and a multiply in 5.24, which moves
# the cuBLAS workspace's first allocation and with it lesson 16's reserved bytes by up to 5.5 %
RECORDED_TRANSFORMERS = "5.17"

CUBLAS_WORKSPACE = 32 * 2**20  # sm90 default (":4096:8"); CUBLAS_WORKSPACE_CONFIG changes it
CUBLASLT_WORKSPACE = 2**20  # CUBLASLT_WORKSPACE_SIZE default, 1024 KiB

SIM_NOTES = (
    "Simulated with FakeTensorMode, taking CUDA's paths (CUDA autocast's op lists and weight "
    "cache, the attention kernel CUDA picks, the optimizer implementation CUDA defaults to, "
    "cuBLAS workspaces); tensor bytes are exact "
    "numel x itemsize; allocated/reserved are predicted by a model of PyTorch's caching allocator "
    "(512 B rounding, segments, caching); there is no timing.",
)

_A = torch.ops.aten
_BLAS = {_A.mm.default, _A.addmm.default, _A.bmm.default, _A.baddbmm.default, _A.addbmm.default,
         _A.addmv.default, _A.mv.default, _A.dot.default, _A.vdot.default,
         _A._addmm_activation.default}
# ops whose CUDA kernels take scratch memory from the caching allocator (lab.measure.sim.cuda_sdpa)
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


def _arg(args, kwargs, index: int, name: str, default):
    return args[index] if len(args) > index else kwargs.get(name, default)


def _swap_unless_same(swap):
    def swap_tensors(t1, t2):
        if not _same_view(t1, t2):
            swap(t1, t2)

    return swap_tensors


def _same_view(a, b) -> bool:
    """The same bytes seen the same way (one storage, shape, strides, offset, dtype)."""
    try:
        return a is b or (a.untyped_storage()._cdata == b.untyped_storage()._cdata
                          and a.dtype == b.dtype and a.shape == b.shape
                          and a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
                          and a.requires_grad == b.requires_grad)
    except Exception:  # no storage (a wrapper subclass): let swap_tensors decide
        return False


class _Rerouted:
    """The ops the tracker hands to `SimPolicy.reroute`: a fixed set, and backward's gradient
    accumulations (lab.measure.sim.grad_accumulate), which only the moment tells apart."""

    def __init__(self, ops: set, accumulate: AccumulateInPlace):
        self.ops, self.accumulate = ops, accumulate

    def __contains__(self, func) -> bool:
        return func in self.ops or self.accumulate.rerouted(func)


class SimPolicy:
    """What the tensor tracker asks in sim: which ops to reroute, what CUDA allocates beside."""

    def __init__(self, allocator: Replay | None = None, tracked: bool = True):
        self.allocator = allocator  # the allocator model that torch.cuda.empty_cache() etc. reach
        # tracked: the CUDA run this stands for has memlab's tracker (a TorchDispatchMode) on, as
        # cuda mode and the lessons' recordings do; ATen then takes its tensor-subclass branches
        # on CUDA too. False: a plain run (`memlab fit`): real tensors' in-place branches
        self.tracked = tracked
        self._saved: list[tuple[object, str, object]] = []
        self.sdpa = CudaSdpa(tracked=tracked)
        self.autocast = CudaAutocast()
        self.dropout = CudaDropout()
        self.optim = CudaOptimDefaults()
        self.accumulate = AccumulateInPlace(active=not tracked)
        # _safe_softmax: FakeTensor runs it whole; CUDA's kernel makes (and frees) its parts
        self.rerouted = _Rerouted({_A.scaled_dot_product_attention.default,
                                   _A._safe_softmax.default}, self.accumulate)
        self.workspaces: set[tuple[str, str]] = set()
        self.values = ValueAssumptions()

    def reroute(self, func, args, kwargs):
        if func is LOCAL_SCALAR:
            return stand_in_scalar(args[0])
        if func is _A._safe_softmax.default:
            return safe_softmax(*args, **kwargs)
        if func is _A.add.Tensor:
            return self.accumulate.take(args, kwargs)
        return self.sdpa.reroute(func, args, kwargs)

    @contextmanager
    def stand_in_values(self):
        """`.item()` of a fake tensor answers a stand-in meanwhile (lab.measure.sim.fake_values)."""
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

    def after(self, func, args, kwargs, out, tracker) -> None:
        if not self.values.active:
            self.values.maybe_patch()
        if func in _SCRATCH:
            n = scratch_bytes(func, args)
            if n:
                tracker.extra_transient(("scratch", func.__name__), n)
            return
        if func in _REDUCTIONS:
            # a long reduction split across thread blocks: staging buffer + semaphores
            buffer, semaphores = op_staging(func, args, kwargs, out)
            if buffer:
                tracker.extra_transients([(("reduce", "buffer"), buffer),
                                          (("reduce", "semaphores"), semaphores)])
            return
        if func not in _BLAS:
            return
        # autograd runs CUDA backward on its own device thread: its own cuBLAS handle/workspace
        thread = "autograd" if torch._C._current_graph_task_id() != -1 else "main"
        need = [("cublas", CUBLAS_WORKSPACE)]
        if _uses_cublaslt(func, args, kwargs):
            need.append(("cublaslt", CUBLASLT_WORKSPACE))
        for lib, nbytes in need:
            key = (lib, thread)
            if key not in self.workspaces:
                self.workspaces.add(key)
                tracker.extra_alloc(key, nbytes)

    def empty_cache(self) -> None:
        if self.allocator is not None:
            self.allocator.empty_cache()

    def set_allocator_settings(self, settings: str) -> None:
        """PYTORCH_CUDA_ALLOC_CONF-style "key:value,...": the model knows expandable_segments."""
        for item in settings.split(","):
            key, _, value = item.partition(":")
            if key.strip() == "expandable_segments" and self.allocator is not None:
                self.allocator.set_expandable(value.strip().lower() == "true")

    def _patch(self, owner, name: str, fn) -> None:
        if hasattr(owner, name):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, fn)

    def __enter__(self):
        self.autocast.install()
        self.sdpa.install()
        self.dropout.install()
        self.optim.install()
        self.values.maybe_patch()  # now if transformers is imported, else at the first op after
        # code that calls the CUDA allocator's API directly reaches the model instead
        self._patch(torch.cuda, "empty_cache", lambda: self.empty_cache())
        self._patch(torch.cuda.memory, "empty_cache", lambda: self.empty_cache())
        self._patch(torch.cuda.memory, "_set_allocator_settings", self.set_allocator_settings)
        self._patch(torch._C, "_accelerator_setAllocatorSettings", self.set_allocator_settings)
        # module.to(device) where the module already is (Lightning's Trainer does): each fake
        # parameter's .to() returns the parameter itself, and Module._apply swaps a FakeTensor
        # parameter with Parameter(result) - a view of the same storage - which swap_tensors
        # refuses when a weak reference is on it (the tracker keeps one). Swapping a tensor with
        # the same view of the same bytes changes nothing, as moving a module to its own device
        # changes nothing on CUDA.
        self._patch(torch.utils, "swap_tensors", _swap_unless_same(torch.utils.swap_tensors))
        return self

    def __exit__(self, *exc):
        for owner, name, fn in reversed(self._saved):
            setattr(owner, name, fn)
        self._saved.clear()
        self.values.restore()
        self.optim.uninstall()
        self.dropout.uninstall()
        self.sdpa.uninstall()
        self.autocast.uninstall()


@contextmanager
def fake_mode():
    """FakeTensorMode alone (tests and tools that only need shapes)."""
    # allow_non_fake_inputs: module-level constants and tensors made before the mode still work
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        yield mode


@contextmanager
def sim_mode():
    """FakeTensorMode + CUDA's paths; yields the `SimPolicy` to give the tensor tracker."""
    with ExitStack() as stack:
        stack.enter_context(fake_mode())
        yield stack.enter_context(SimPolicy())


def new_allocator(cap: int | None) -> Replay:
    # the real allocator reads PYTORCH_CUDA_ALLOC_CONF when CUDA starts; a variant's env sets it
    # before the worker imports torch (lesson 17's expandable_segments)
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").replace(" ", "")
    allocator = Replay(cap=cap, series=True, expandable="expandable_segments:True" in conf)
    allocator.current_stream = _SelectedStream()
    return allocator


class _SelectedStream:
    """The stream device-agnostic code selected, as a number (0: the default stream).

    Sim runs on CPU fake tensors, so code written for any device (FSDP2's all-gather and
    reduce-scatter streams) selects `torch.cpu` streams: `with device_handle.stream(s)` sets
    `torch.cpu._current_stream`, which CUDA code would have set on the GPU. Each stream object
    gets a number for as long as the run lives (the dict keeps the object, hashed by identity)."""

    def __init__(self):
        import torch.cpu as cpu

        self._cpu = cpu
        self._numbers = {getattr(cpu, "_default_cpu_stream", None): 0}

    def __call__(self) -> int:
        current = getattr(self._cpu, "_current_stream", None)
        return self._numbers.setdefault(current, len(self._numbers))


def version_notes() -> list[str]:
    notes = []
    tv = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if tv not in VALIDATED_TORCH:
        notes.append(f"torch {torch.__version__}: the simulation's CUDA paths are validated for "
                     f"torch {', '.join(VALIDATED_TORCH)}; other versions may choose differently.")
    if not CudaOptimDefaults.available():
        notes.append(f"torch {torch.__version__}: optimizers left at their default take the CPU's "
                     "per-parameter loop in sim, not the foreach implementation CUDA picks.")
    tf = transformers_version()
    if tf and not tf.startswith(VALIDATED_TRANSFORMERS_MAJOR + "."):
        notes.append(f"transformers {tf}: validated for transformers "
                     f"{VALIDATED_TRANSFORMERS_MAJOR}.x.")
    elif tf and ".".join(tf.split(".")[:2]) != RECORDED_TRANSFORMERS:
        notes.append(f"transformers {tf}: sim was checked against H200 runs with transformers "
                     f"{RECORDED_TRANSFORMERS}; model code differs between versions, which "
                     "leaves tensor bytes alike but can move the allocator's reserved bytes.")
    return notes


def transformers_version() -> str:
    try:
        return metadata.version("transformers")
    except metadata.PackageNotFoundError:
        return ""
