"""The private PyTorch APIs the lab uses, feature-detected: thin shims only (Dynamo's and
Inductor's, for sim's compiled estimate, are in torch_compat_compile.py, in the same form).

The lab measures memory by sitting where PyTorch keeps its internals: a dispatch mode on every
op, fake tensors, the caching allocator's history, the autograd engine's thread, the fake process
group. None of those are public APIs, and they move between releases. Everything outside these
two modules reaches them through their names (tests/unit/test_torch_compat.py parses the package
and fails on any underscore attribute or module of `torch` used elsewhere), so a new torch
breaks in one place, and `CHECKED` says which torch each was read in and on which it runs.
What is built on these names lives with its user: sim's fast path through FakeTensorMode's
dispatch cache (a subclass overriding its private methods, the checks that it agrees with the
stock way) is lab/measure/sim/dispatch; its rows below name the methods it overrides. Importing
this module imports torch.
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch._C as _C
import torch._prims_common as _prims_common
import torch.utils._python_dispatch as _python_dispatch
import torch.utils._device as _device
import torch.utils._pytree as _pytree
from torch.utils._mode_utils import no_dispatch
import torch._subclasses.fake_tensor as _fake_tensor
from torch._subclasses.fake_tensor import (FakeTensor, FakeTensorConfig, FakeTensorMode,
                                           unset_fake_temporarily)

from .versions import validated_versions

# The versions every entry runs on (lab/measure/versions.json, the one table: the H200 runs torch
# 2.11 (cu130), this lab's CPU machines 2.13 (cpu)); `read_in`: the torch whose source was read.
CHECKED_ON = validated_versions("torch")


@dataclass(frozen=True)
class PrivateApi:
    name: str  # what the lab calls (in this module; "sim/dispatch: ..." for what it overrides)
    torch_name: str  # what it is in torch
    why: str
    read_in: str  # the torch version whose source it was read from (and a range where it moved)


SIM_DISPATCH = "sim's fast path through the dispatch cache (lab/measure/sim/dispatch)"
CHECKED: list[PrivateApi] = [
    PrivateApi("TorchDispatchMode", "torch.utils._python_dispatch.TorchDispatchMode",
               "the tensor tracker sees every aten op", "2.13"),
    PrivateApi("is_traceable_wrapper_subclass / is_traceable_wrapper_subclass_type",
               "torch.utils._python_dispatch: is_traceable_wrapper_subclass(_type)", "wrapper "
               "subclasses (DTensor, torchao) are counted by what they wrap, their ops handed on",
               "2.13"),
    PrivateApi("disable_current_modes", "torch.utils._python_dispatch._disable_current_modes",
               "code that must run on real values inside sim (device meshes, DDP's checks)",
               "2.13"),
    PrivateApi("tree_flatten / tree_unflatten", "torch.utils._pytree",
               "an op's output tensors; sim's evaluation cap rebuilds a forward's outputs", "2.13"),
    PrivateApi("FakeTensorMode / FakeTensor / FakeTensorConfig / unset_fake_temporarily",
               "torch._subclasses.fake_tensor", "sim: tensors with shapes and storages, no data; "
               "real ones for a constant a library computes from values (Session.real_values)", "2.13"),
    PrivateApi("sim/dispatch: SimFakeTensorMode's key", "FakeTensorMode._prep_args_for_hash, "
               "_cache_key, FakeTensor._has_symbolic_sizes_strides",
               f"{SIM_DISPATCH}: the key built without TensorMetadata (self-checked)", "2.13"),
    PrivateApi("sim/dispatch: SimFakeTensorMode's hits", "FakeTensorMode."
               "_get_output_tensor_from_cache_entry / _cached_dispatch_impl / _dispatch_impl / "
               "_allow_unsafe_data_ptr_access, TorchDispatchMode._should_skip_dynamo, "
               "Tensor._is_view (the self-checks)",
               f"{SIM_DISPATCH}: a hit's output made in line, _unsafe_view from a table, "
               "straight to the cache (self-checked)", "2.13"),
    PrivateApi("CacheKeyState / DispatchCacheKey / BypassDispatchCache / "
               "DispatchCacheValidEntry / SingletonConstant / extract_tensor_metadata / "
               "dispatch_handled_apart / fake_tensor_log / fake_cache_available",
               "torch._subclasses.fake_tensor: _CacheKeyState, _DispatchCacheKey, "
               "_BypassDispatchCache, _DispatchCacheValidEntry, SingletonConstant, "
               "extract_tensor_metadata, _DISPATCH_META_HANDLERS, _DISPATCH_HANDLE_DIRECTLY, log",
               f"{SIM_DISPATCH}: the cache's key, entries and what it answers apart", "2.13"),
    PrivateApi("get_dispatch_mode / FAKE_MODE_KEY / dispatch_stack_depth / "
               "disable_torch_function_subclass / DisableTorchDispatch / no_dispatch",
               "torch._C._get_dispatch_mode, _TorchDispatchModeKey.FAKE, "
               "_len_torch_dispatch_stack, DisableTorchFunctionSubclass, _DisableTorchDispatch, "
               "torch.utils._mode_utils.no_dispatch",
               f"{SIM_DISPATCH}: the fake mode below the tracker, answered without the "
               "dispatcher", "2.13"),
    PrivateApi("make_subclass / set_throw_on_mutable_data_ptr / "
               "set_warn_deprecated_on_mutable_data_ptr / meta_in_tls_dispatch_include / "
               "dispatch_keys / get_default_device / suggest_memory_format / OpOverload",
               "torch.Tensor._make_subclass, torch._C._set_throw_on_mutable_data_ptr, "
               "_set_warn_deprecated_on_mutable_data_ptr, _meta_in_tls_dispatch_include, "
               "_dispatch_keys, _get_default_device, torch._prims_common.suggest_memory_format, "
               "torch._ops.OpOverload",
               f"{SIM_DISPATCH}: a hit's fake tensor made as FakeTensor.__new__ makes it", "2.13"),
    PrivateApi("current_graph_task_id", "torch._C._current_graph_task_id",
               "inside backward: autograd's device thread takes its own cuBLAS workspace", "2.13"),
    PrivateApi("has_composite_implicit_kernel / run_composite_implicit",
               "torch._C._dispatch_has_kernel_for_dispatch_key, OpOverload._op_dk + "
               "DispatchKey.CompositeImplicitAutograd",
               "composite ops under inference_mode, decomposed as autograd would", "2.13"),
    PrivateApi("push_dispatch_mode / pop_dispatch_mode / current_dispatch_modes",
               "torch._C._push_on_torch_dispatch_stack, _pop_torch_dispatch_stack, "
               "torch.utils._python_dispatch._get_current_dispatch_mode_stack", "the tracker "
               "re-enters itself without `with self`; is this code under sim's fake mode?", "2.13"),
    PrivateApi("exclude_autocast_cpu",
               "torch._C._ExcludeDispatchKeyGuard, DispatchKeySet(AutocastCPU)",
               "sim's CUDA autocast kernels run below the CPU autocast key", "2.13"),
    PrivateApi("aten_ops_with_kernel / has_kernel_for", "torch._C._dispatch_get_all_op_names, "
               "torch._C._dispatch_has_kernel_for_dispatch_key", "which ops CUDA autocast casts "
               "in this torch (its AutocastCUDA registrations)", "2.13"),
    PrivateApi("op_schema", "OpOverload._schema", "an op's arguments (autocast's dtype argument)",
               "2.13"),
    PrivateApi("storage_key / storage_use_count / tensor_use_count", "UntypedStorage._cdata, "
               "torch._C._storage_Use_Count, Tensor._use_count", "one id per storage (views "
               "included); can autograd add a gradient in place (sim, InputBuffer::accumulate)",
               "2.13"),
    PrivateApi("fake_store", "torch.testing._internal.distributed.fake_pg.FakeStore",
               "sim: many ranks in one process with the fake process group", "2.13"),
    PrivateApi("optimizer_foreach_defaults",
               "torch.optim.optimizer._get_foreach_kernels_supported_devices, "
               "torch.optim.optimizer._foreach_supported_types",
               "sim: optimizers left at their default take CUDA's foreach path", "2.13"),
    PrivateApi("ddp_param_shape_check / ddp_bucket_sizes / rebuild_buckets",
               "torch.nn.parallel.distributed._verify_param_shape_across_processes, "
               "torch.distributed._compute_bucket_assignment_by_size, _DEFAULT_FIRST_BUCKET_BYTES, "
               "DistributedDataParallel._bucket_config, Reducer._rebuild_buckets", "sim: DDP's "
               "constructor check with modes off; the buckets its reducer rebuilds, labelled",
               "2.13"),
    PrivateApi("dtensor_target", "torch.distributed.tensor._sharding_prop: _propagate_use_strided_"
               "shard_flag, _expand_single_dim_strategy_to_mesh, ShardingPropagator._propagate_"
               "tensor_meta_non_cached; placement_types._StridedShard, _op_schema.TupleStrategy",
               "sim: a foreach op's sharding found once per kind of element", "2.13"),
    PrivateApi("fsdp_chunk_target / fsdp_offload_targets", "torch.distributed.fsdp."
               "_fully_shard: _fsdp_param._chunk_with_empty, FSDPParam._init_sharded_param, "
               "_fsdp_param_group.foreach_reduce, FSDPParamGroup._validate_no_meta_params / "
               "_validate_cpu_offload_params", "sim: FSDP2's chunks made lazily; its "
               "CPUOffloadPolicy moves shards and gradients to the host", "2.13 (FSDP2: >= 2.6)"),
    PrivateApi("parse_to", "torch._C._nn._parse_to", "sim: the device a Tensor.to call names",
               "2.13"),
    PrivateApi("cpu_current_stream / cpu_default_stream / set_cpu_current_stream",
               "torch.cpu._current_stream, torch.cpu._default_cpu_stream", "sim: the stream FSDP2 "
               "(or torch.cuda.set_stream) selected: torch.cpu streams stand for CUDA's", "2.13"),
    PrivateApi("conv_benchmark_empty_cache_targets",
               "torch._C._cudnn_set_conv_benchmark_empty_cache, "
               "torch._C._cuda_get_conv_benchmark_empty_cache (CUDA builds only)",
               "sim adds them for a run: a script's switch of cuDNN's emptying of the cache "
               "after each benchmark search reaches sim's cuDNN model",
               "2.11 (the H100 recordings' effect; the source read was unpinned)"),
    PrivateApi("allocator_settings_targets / set_allocator_settings",
               "torch._C._accelerator_setAllocatorSettings (>= 2.9), "
               "torch.cuda.memory._set_allocator_settings (2.1-2.8)",
               "allocator settings at run time (lesson 17)", "2.13 and 2.8"),
    PrivateApi("clear_cublas_workspaces", "torch._C._cuda_clearCublasWorkspaces",
               "a second attempt in one process measures as a fresh one", "2.13"),
    PrivateApi("record_memory_history / stop_memory_history / memory_snapshot / "
               "attach_oom_observer", "torch.cuda.memory._record_memory_history, "
               "torch.cuda.memory._snapshot, torch._C._cuda_attach_out_of_memory_observer",
               "the caching allocator's own event history (stacks='python'); a snapshot at the "
               "failing allocation", "2.13 (the signature: 2.0 and >= 2.1; the observer: 2.11)"),
    # the CUDA facade: a user's CUDA script in sim (lab/measure/sim/facade)
    PrivateApi("fake_exceptions", "torch._subclasses.fake_tensor: DataDependentOutputException, "
               "DynamicOutputShapeException", "what FakeTensor raises for an op that reads values "
               "or sizes its output by them: refused in one line", "2.13"),
    PrivateApi("default_device / set_default_device_marker / device_constructors",
               "torch.utils._device.CURRENT_DEVICE, torch.utils._device._device_constructors",
               "where a factory without a device puts its tensor (set_default_device('cuda'))",
               "2.13"),
    PrivateApi("generator_base", "torch._C.Generator", "torch.Generator(device='cuda') in sim",
               "2.13"),
    PrivateApi("single_process_dataloader_iter",
               "torch.utils.data.dataloader._SingleProcessDataLoaderIter",
               "sim runs a DataLoader's workers in the process", "2.13"),
]


# ---- FakeTensorMode's dispatch cache (sim's fast path: lab/measure/sim/dispatch) -----------------
# Bare names, not wrappers: sim reads them on every op. Missing in a torch: None, and
# `fake_cache_available` False, which keeps sim on the stock way (lab/measure/sim/dispatch checks).
_fake, _c = vars(_fake_tensor).get, vars(_C).get
CacheKeyState, DispatchCacheKey = _fake("_CacheKeyState"), _fake("_DispatchCacheKey")
BypassDispatchCache, DispatchCacheValidEntry = _fake("_BypassDispatchCache"), _fake(
    "_DispatchCacheValidEntry")
SingletonConstant, extract_tensor_metadata = _fake("SingletonConstant"), _fake(
    "extract_tensor_metadata")
fake_tensor_log = _fake("log")
_META_HANDLERS = _fake("_DISPATCH_META_HANDLERS")
_HANDLE_DIRECTLY = _fake("_DISPATCH_HANDLE_DIRECTLY")
get_dispatch_mode, dispatch_stack_depth = _c("_get_dispatch_mode"), _c("_len_torch_dispatch_stack")
FAKE_MODE_KEY = getattr(_c("_TorchDispatchModeKey"), "FAKE", None)
disable_torch_function_subclass = _C.DisableTorchFunctionSubclass
DisableTorchDispatch = _c("_DisableTorchDispatch")
meta_in_tls_dispatch_include = _c("_meta_in_tls_dispatch_include")
set_throw_on_mutable_data_ptr = _c("_set_throw_on_mutable_data_ptr")
set_warn_deprecated_on_mutable_data_ptr = _c("_set_warn_deprecated_on_mutable_data_ptr")
dispatch_keys, get_default_device = _c("_dispatch_keys"), _c("_get_default_device")
make_subclass = getattr(torch.Tensor, "_make_subclass", None)
suggest_memory_format = _prims_common.suggest_memory_format
OpOverload = torch._ops.OpOverload
fake_cache_available = None not in (
    CacheKeyState, DispatchCacheKey, BypassDispatchCache, DispatchCacheValidEntry,
    SingletonConstant, extract_tensor_metadata, fake_tensor_log, _META_HANDLERS, _HANDLE_DIRECTLY,
    get_dispatch_mode, dispatch_stack_depth, FAKE_MODE_KEY, DisableTorchDispatch,
    meta_in_tls_dispatch_include, set_throw_on_mutable_data_ptr,
    set_warn_deprecated_on_mutable_data_ptr, dispatch_keys, get_default_device, make_subclass)


def dispatch_handled_apart(func) -> bool:
    """An op FakeTensorMode.dispatch hands to a handler of its own, not to its cache."""
    return func in _META_HANDLERS or func in _HANDLE_DIRECTLY


# ---- dispatch and pytrees ----------------------------------------------------------------------
TorchDispatchMode = _python_dispatch.TorchDispatchMode
is_traceable_wrapper_subclass = _python_dispatch.is_traceable_wrapper_subclass
is_traceable_wrapper_subclass_type = _python_dispatch.is_traceable_wrapper_subclass_type
disable_current_modes = _python_dispatch._disable_current_modes
tree_flatten, tree_unflatten = _pytree.tree_flatten, _pytree.tree_unflatten
generator_base = _C.Generator  # torch.Generator(device='cuda') in sim: a host one


def push_dispatch_mode(mode) -> None:
    """Put `mode` back on the dispatch-mode stack, as `with mode` does, without the Python flags
    and hooks of a first entry (for a mode re-entering itself inside its __torch_dispatch__)."""
    _C._push_on_torch_dispatch_stack(mode)


def pop_dispatch_mode() -> None:
    """Undo `push_dispatch_mode`: take the top mode off the stack."""
    _C._pop_torch_dispatch_stack(None)


def current_dispatch_modes() -> list:
    """The TorchDispatchModes active on this thread, outermost first."""
    return list(_python_dispatch._get_current_dispatch_mode_stack())


def exclude_autocast_cpu():
    """A guard under which ops skip CPU autocast's kernels (sim's CUDA autocast runs there)."""
    return _C._ExcludeDispatchKeyGuard(_C.DispatchKeySet(_C.DispatchKey.AutocastCPU))


def has_kernel_for(op_name: str, dispatch_key: str) -> bool:
    """'aten::mm' has a kernel registered for 'AutocastCUDA' in this torch build?"""
    return _C._dispatch_has_kernel_for_dispatch_key(op_name, dispatch_key)


def aten_ops_with_kernel(dispatch_key: str) -> set[str]:
    """The aten op names ('mm', 'linalg_vector_norm', ...) with a kernel for `dispatch_key`
    (a new set each call; the registrations are read once per process and key)."""
    return set(_aten_ops_with_kernel(dispatch_key))


@functools.lru_cache(maxsize=None)
def _aten_ops_with_kernel(dispatch_key: str) -> frozenset[str]:
    return frozenset(full[len("aten::"):] for full in _C._dispatch_get_all_op_names()
                     if full.startswith("aten::") and has_kernel_for(full, dispatch_key))


def op_schema(op):
    """The FunctionSchema of an OpOverload (its arguments, their names)."""
    return op._schema


def storage_use_count(storage) -> int:
    """How many holders a storage has (the Python storage object asking counts one)."""
    return _C._storage_Use_Count(storage._cdata)


def tensor_use_count(t) -> int:
    """How many holders a tensor's TensorImpl has."""
    return t._use_count()


def fake_store():
    """A Store for torch.distributed's "fake" backend: many ranks in one process, no data."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


def fsdp_chunk_target() -> tuple[Any, str] | None:
    """(module, name) of FSDP2's `_chunk_with_empty` (torch >= 2.6), or None."""
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_param
    except ImportError:
        return None
    return (_fsdp_param, "_chunk_with_empty") if hasattr(_fsdp_param, "_chunk_with_empty") else None


def dtensor_target(which: str) -> tuple[Any, str, Any] | None:
    """(owner, name, a class it needs) of what `which` wraps in DTensor (read in 2.13), or None."""
    try:
        from torch.distributed.tensor import _op_schema, _sharding_prop as sp, placement_types
    except ImportError:
        return None
    ss, ts = getattr(placement_types, "_StridedShard", None), getattr(_op_schema, "TupleStrategy", None)
    owner, name, kind = {"strided_flag": (sp, "_propagate_use_strided_shard_flag", ss),
                         "foreach_expand": (sp, "_expand_single_dim_strategy_to_mesh", ts),
                         "foreach_meta": (getattr(sp, "ShardingPropagator", None),
                                          "_propagate_tensor_meta_non_cached", object)}[which]
    return (owner, name, kind) if kind and callable(getattr(owner, name, None)) else None


def fsdp_offload_targets() -> tuple[Any, Any, Any] | None:
    """(FSDPParam, the _fsdp_param_group module, FSDPParamGroup) when FSDP2 has every name sim's
    CPU offload wraps (lab/measure/sim/kernels/fsdp_offload.py; read in torch 2.13), else None."""
    try:
        from torch.distributed.fsdp._fully_shard import _fsdp_param, _fsdp_param_group
    except ImportError:
        return None
    param_cls = getattr(_fsdp_param, "FSDPParam", None)
    group_cls = getattr(_fsdp_param_group, "FSDPParamGroup", None)
    if (param_cls is None or group_cls is None
            or not hasattr(param_cls, "_init_sharded_param")
            or not hasattr(_fsdp_param_group, "foreach_reduce")
            or not all(hasattr(group_cls, n) for n in ("_validate_no_meta_params",
                                                      "_validate_cpu_offload_params"))):
        return None
    return param_cls, _fsdp_param_group, group_cls


def parse_to(*args, **kwargs) -> tuple:
    """(device, dtype, non_blocking) of `Tensor.to(*args, **kwargs)`: the first three of what
    the C parser returns."""
    return tuple(torch._C._nn._parse_to(*args, **kwargs))[:3]


def ddp_param_shape_check() -> tuple[Any, str]:
    """(module, name) of DDP's constructor check of parameter shapes across ranks."""
    import torch.nn.parallel.distributed as ddp_module

    return ddp_module, "_verify_param_shape_across_processes"


def ddp_bucket_sizes(ddp, params: list) -> list[list[int]]:
    """The buckets (lists of indices into `params`) DDP's reducer makes, by its size caps."""
    import torch.distributed as dist

    config = getattr(ddp, "_bucket_config", None)
    limits = [getattr(config, "first_bucket_bytes_cap", dist._DEFAULT_FIRST_BUCKET_BYTES),
              getattr(config, "bucket_bytes_cap", getattr(ddp, "bucket_bytes_cap", 25 << 20))]
    indices, _ = dist._compute_bucket_assignment_by_size(params, limits, [False] * len(params))
    return indices


def rebuild_buckets(reducer) -> bool:
    return reducer._rebuild_buckets()


def optimizer_foreach_defaults() -> tuple[Any, str, list] | None:
    """(torch.optim.optimizer, the name of its device-list function, its list of tensor types
    that may take foreach kernels): what optimizers left at their default consult (torch 2.x)."""
    import torch.optim.optimizer as optimizer

    fn = getattr(optimizer, "_get_foreach_kernels_supported_devices", None)
    types = getattr(optimizer, "_foreach_supported_types", None)
    if callable(fn) and isinstance(types, list):
        return optimizer, "_get_foreach_kernels_supported_devices", types
    return None

_CIA = _C.DispatchKey.CompositeImplicitAutograd


def has_composite_implicit_kernel(func) -> bool:
    """An aten op implemented by other ops (CompositeImplicitAutograd)."""
    return func.namespace == "aten" and _C._dispatch_has_kernel_for_dispatch_key(
        func.name(), "CompositeImplicitAutograd")


def run_composite_implicit(func, *args, **kwargs):
    """The C++ composite kernel of `func` (not a Python decomposition: those can differ)."""
    return func._op_dk(_CIA, *args, **kwargs)


def current_graph_task_id() -> int:
    """-1 outside backward; else the id of the autograd graph task running on this thread."""
    return _C._current_graph_task_id()


def storage_key(storage) -> int:
    """One integer per storage (every view of it gives the same), stable while it lives."""
    return storage._cdata


def cpu_current_stream():
    """The stream code selected on torch.cpu (FSDP2's, in sim); asked at each allocation sim models."""
    return getattr(torch.cpu, "_current_stream", None)


def cpu_default_stream():
    return getattr(torch.cpu, "_default_cpu_stream", None)


# ---- the CUDA caching allocator ----------------------------------------------------------------
def allocator_settings_targets() -> list[tuple[Any, str]]:
    """(owner, attribute) of the functions that change allocator settings at run time, newest
    first: `torch._C._accelerator_setAllocatorSettings` (torch >= 2.9) replaced
    `torch.cuda.memory._set_allocator_settings` (2.1-2.8, deprecated since). Sim replaces both."""
    return [(owner, name) for owner, name in ((_C, "_accelerator_setAllocatorSettings"),
                                              (torch.cuda.memory, "_set_allocator_settings"))
            if hasattr(owner, name)]


def conv_benchmark_empty_cache_targets() -> tuple[Any, str, str]:
    """(owner, setter, getter) of cuDNN's switch for emptying the allocator's cache after each
    benchmark search (`torch._C._cudnn_set_conv_benchmark_empty_cache(bool)` /
    `_cuda_get_conv_benchmark_empty_cache()`): CUDA-only bindings, absent from a CPU build, which
    sim adds for a run."""
    return _C, "_cudnn_set_conv_benchmark_empty_cache", "_cuda_get_conv_benchmark_empty_cache"


def set_allocator_settings(settings: str) -> bool:
    """e.g. "expandable_segments:True" at run time; False when this torch cannot."""
    for owner, name in allocator_settings_targets():
        try:
            getattr(owner, name)(settings)
            return True
        except Exception:
            continue
    return False


def clear_cublas_workspaces() -> None:
    getattr(_C, "_cuda_clearCublasWorkspaces", lambda: None)()


def record_memory_history(max_entries: int) -> None:
    """Start the allocator's history with Python stacks only (C++ stacks make snapshots slow;
    torchtitan's profiler says the same). The signature changed in 2.1."""
    fn = torch.cuda.memory._record_memory_history
    params = inspect.signature(fn).parameters
    if "stacks" in params:  # torch >= 2.1
        # max_entries: the ring's size; compile_context (>= 2.5): which compiled graph allocated
        kwargs = {k: v for k, v in {"stacks": "python", "max_entries": max_entries,
                                    "compile_context": True}.items() if k in params}
        fn(enabled="all", **kwargs)
    else:  # torch 2.0
        fn(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)


def stop_memory_history() -> None:
    fn = torch.cuda.memory._record_memory_history
    fn(enabled=None) if "stacks" in inspect.signature(fn).parameters else fn(False)


def memory_snapshot() -> dict:
    """The allocator's segments and its event history (what `_dump_snapshot` pickles)."""
    return torch.cuda.memory._snapshot()


def attach_oom_observer(fn: Callable[[int, int, int, int], None]) -> bool:
    """fn(device, segment asked for, cap or the card's total, driver's free) runs when the caching
    allocator fails, its lock released (>= 2.1), before it raises; never detached: once a process."""
    attach = getattr(_C, "_cuda_attach_out_of_memory_observer", None)
    return attach is not None and attach(fn) is None


# ---- the CUDA facade (a user's CUDA script in sim) ------------------------------------------------
def fake_exceptions() -> tuple[type, type]:
    """(what FakeTensor raises for an op that reads values, ... whose output shape depends on
    values): DataDependentOutputException, DynamicOutputShapeException."""
    return _fake_tensor.DataDependentOutputException, _fake_tensor.DynamicOutputShapeException


def default_device():
    """The device `torch.set_default_device` / `with torch.device(...)` made current, or None."""
    return getattr(_device, "CURRENT_DEVICE", None)


def set_default_device_marker(device) -> None:
    """Put the module's record of the current default device back (torch.utils.checkpoint's
    recomputation re-enters the global DeviceContext, which then restores the wrong one)."""
    if hasattr(_device, "CURRENT_DEVICE"):
        _device.CURRENT_DEVICE = device


def device_constructors() -> set:
    """The factories a default device applies to (torch.utils._device's list)."""
    fn = getattr(_device, "_device_constructors", None)
    return set(fn()) if callable(fn) else set()


def set_cpu_current_stream(stream) -> None:
    torch.cpu._current_stream = stream


def single_process_dataloader_iter():
    from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

    return _SingleProcessDataLoaderIter


__all__ = [
    "CHECKED", "CHECKED_ON", "PrivateApi", "FakeTensor", "FakeTensorConfig", "FakeTensorMode",
    "TorchDispatchMode", "is_traceable_wrapper_subclass", "is_traceable_wrapper_subclass_type",
    "disable_current_modes", "tree_flatten", "tree_unflatten", "push_dispatch_mode",
    "pop_dispatch_mode", "current_dispatch_modes", "exclude_autocast_cpu", "has_kernel_for",
    "aten_ops_with_kernel", "op_schema", "storage_use_count", "tensor_use_count", "fake_store",
    "fsdp_chunk_target", "dtensor_target", "fsdp_offload_targets", "parse_to",
    "ddp_param_shape_check", "ddp_bucket_sizes", "rebuild_buckets", "optimizer_foreach_defaults",
    "has_composite_implicit_kernel", "run_composite_implicit", "current_graph_task_id",
    "storage_key", "cpu_current_stream", "cpu_default_stream", "set_cpu_current_stream",
    "allocator_settings_targets", "set_allocator_settings", "clear_cublas_workspaces",
    "conv_benchmark_empty_cache_targets",
    "record_memory_history", "stop_memory_history", "memory_snapshot", "attach_oom_observer",
    "fake_exceptions", "default_device", "set_default_device_marker", "device_constructors",
    "generator_base", "single_process_dataloader_iter", "unset_fake_temporarily",
    # FakeTensorMode's dispatch cache (lab/measure/sim/dispatch)
    "CacheKeyState", "DispatchCacheKey", "BypassDispatchCache", "DispatchCacheValidEntry",
    "SingletonConstant", "extract_tensor_metadata", "fake_tensor_log", "fake_cache_available",
    "dispatch_handled_apart", "get_dispatch_mode", "FAKE_MODE_KEY", "dispatch_stack_depth",
    "disable_torch_function_subclass", "DisableTorchDispatch", "meta_in_tls_dispatch_include",
    "set_throw_on_mutable_data_ptr", "set_warn_deprecated_on_mutable_data_ptr", "dispatch_keys",
    "get_default_device", "make_subclass", "suggest_memory_format", "OpOverload", "no_dispatch",
]
