"""Every private PyTorch API the lab uses, in one place, feature-detected.

The lab measures memory by sitting where PyTorch keeps its internals: a dispatch mode on every
op, fake tensors, the caching allocator's history, the autograd engine's thread, the fake process
group. None of those are public APIs, and they move between releases. Everything outside this
module reaches them through the names below (tests/unit/test_torch_compat.py parses the package
and fails on any underscore attribute or module of `torch` used elsewhere), so a new torch
breaks in one file, and `CHECKED` says on which versions each was read and run.

Backend-neutral: cuda (history, workspaces), sim (fake tensors, dispatch), snapshots and profile
all import from here. Importing it imports torch.
"""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch._C as _C
import torch.utils._python_dispatch as _python_dispatch
import torch.utils._pytree as _pytree
from torch.utils._mode_utils import no_dispatch
import torch._subclasses.fake_tensor as _fake_tensor
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorConfig, FakeTensorMode

from .versions import validated_versions

# The versions every entry below was read in and run on (lab/measure/versions.json, the one
# table: the H200 runs torch 2.11, this lab's CPU machines 2.13). An entry that needs another
# range says so.
CHECKED_ON = validated_versions("torch")


@dataclass(frozen=True)
class PrivateApi:
    name: str  # what the lab calls (in this module)
    torch_name: str  # what it is in torch
    why: str


CHECKED: list[PrivateApi] = [
    PrivateApi("TorchDispatchMode", "torch.utils._python_dispatch.TorchDispatchMode",
               "the tensor tracker sees every aten op"),
    PrivateApi("is_traceable_wrapper_subclass",
               "torch.utils._python_dispatch.is_traceable_wrapper_subclass",
               "wrapper subclasses (DTensor, torchao) are counted by what they wrap"),
    PrivateApi("disable_current_modes", "torch.utils._python_dispatch._disable_current_modes",
               "code that must run on real values inside sim (device meshes, DDP's checks)"),
    PrivateApi("tree_flatten", "torch.utils._pytree.tree_flatten", "an op's output tensors"),
    PrivateApi("FakeTensorMode / FakeTensor", "torch._subclasses.fake_tensor",
               "sim: tensors with shapes and storages, no data"),
    PrivateApi("SimFakeTensorMode", "FakeTensorMode._prep_args_for_hash, "
               "torch._subclasses._fake_tensor_utils._CacheKeyState",
               "sim: the dispatch cache's key of plain fake tensors built without the "
               "TensorMetadata dataclass (the same key, self-checked; ~40 % of a sim run)"),
    PrivateApi("SimFakeTensorMode (a cache hit's output)",
               "FakeTensorMode._get_output_tensor_from_cache_entry, FakeTensor.__new__ "
               "(Tensor._make_subclass(dispatch_device=True), its attributes), "
               "torch._C._DisableTorchDispatch, _PreserveDispatchKeyGuard, "
               "_set_meta_in_tls_dispatch_include, _set_throw_on_mutable_data_ptr",
               "sim: a cache hit's output tensor made in line, as FakeTensorMode makes it "
               "(self-checked; ~17 % of a sim run)"),
    PrivateApi("current_graph_task_id", "torch._C._current_graph_task_id",
               "inside backward: autograd's device thread takes its own cuBLAS workspace"),
    PrivateApi("storage_key", "UntypedStorage._cdata", "one id per storage, views included"),
    PrivateApi("has_composite_implicit_kernel",
               "torch._C._dispatch_has_kernel_for_dispatch_key", "composite ops under inference_mode"),
    PrivateApi("run_composite_implicit", "OpOverload._op_dk + DispatchKey.CompositeImplicitAutograd",
               "decompose a composite op as autograd would"),
    PrivateApi("is_traceable_wrapper_subclass_type",
               "torch.utils._python_dispatch.is_traceable_wrapper_subclass_type",
               "which op types a wrapper subclass's dispatch handles"),
    PrivateApi("push_dispatch_mode / pop_dispatch_mode",
               "torch._C._push_on_torch_dispatch_stack, torch._C._pop_torch_dispatch_stack",
               "the tracker re-enters itself for a composite op's parts without `with self`"),
    PrivateApi("SimFakeTensorMode (dispatch)", "FakeTensorMode.__torch_dispatch__ / dispatch, "
               "fake_tensor._DISPATCH_META_HANDLERS, _DISPATCH_HANDLE_DIRECTLY, log, "
               "TorchDispatchMode._should_skip_dynamo",
               "sim: an op straight to the dispatch cache, without the call counter, the debug "
               "log under no_dispatch() and torch._disable_dynamo's wrapper"),
    PrivateApi("cached_answer", "FakeTensorMode._cache_key, FakeTensorMode.cache, "
               "fake_tensor._CacheKeyState / _BypassDispatchCache / _DispatchCacheKey / "
               "_DispatchCacheValidEntry / SingletonConstant, "
               "torch._C._get_dispatch_mode(_TorchDispatchModeKey.FAKE), "
               "_len_torch_dispatch_stack",
               "sim: the tracker takes a plain cache hit from the fake mode below it without "
               "the trip through the dispatcher"),
    PrivateApi("SimFakeTensorMode (_unsafe_view)", "FakeTensorMode._cache_key / _dispatch_impl, "
               "fake_tensor._CacheKeyState, _BypassDispatchCache, extract_tensor_metadata",
               "sim: aten._unsafe_view, which FakeTensorMode never caches, from a table of its "
               "own, made as a view of its input (self-checked)"),
    PrivateApi("current_dispatch_modes", "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
               "is this code running under sim's FakeTensorMode?"),
    PrivateApi("exclude_autocast_cpu", "torch._C._ExcludeDispatchKeyGuard, DispatchKeySet(AutocastCPU)",
               "sim's CUDA autocast kernels run below the CPU autocast key"),
    PrivateApi("aten_ops_with_kernel / has_kernel_for",
               "torch._C._dispatch_get_all_op_names, torch._C._dispatch_has_kernel_for_dispatch_key",
               "which ops CUDA autocast casts in this torch (its AutocastCUDA registrations)"),
    PrivateApi("op_schema", "OpOverload._schema", "an op's arguments (autocast's dtype argument)"),
    PrivateApi("storage_use_count / tensor_use_count",
               "torch._C._storage_Use_Count, Tensor._use_count",
               "can the autograd engine add a gradient in place (sim, InputBuffer::accumulate)"),
    PrivateApi("fake_store", "torch.testing._internal.distributed.fake_pg.FakeStore",
               "sim: many ranks in one process with the fake process group"),
    PrivateApi("optimizer_foreach_defaults",
               "torch.optim.optimizer._get_foreach_kernels_supported_devices, "
               "torch.optim.optimizer._foreach_supported_types",
               "sim: optimizers left at their default take CUDA's foreach path"),
    PrivateApi("ddp_param_shape_check", "torch.nn.parallel.distributed."
               "_verify_param_shape_across_processes", "sim: DDP's constructor check, modes off"),
    PrivateApi("ddp_bucket_sizes", "torch.distributed._compute_bucket_assignment_by_size, "
               "_DEFAULT_FIRST_BUCKET_BYTES, DistributedDataParallel._bucket_config",
               "sim: the buckets DDP's reducer rebuilds after the first backward"),
    PrivateApi("rebuild_buckets", "Reducer._rebuild_buckets (called by DDP by that name; "
               "lab/measure/ddp.py's wrapper answers it)", "DDP's rebuilt buckets are labelled"),
    PrivateApi("fsdp_chunk_target", "torch.distributed.fsdp._fully_shard._fsdp_param."
               "_chunk_with_empty", "sim: FSDP2's chunks made lazily"),
    PrivateApi("dtensor_strided_flag_target", "torch.distributed.tensor._sharding_prop."
               "_propagate_use_strided_shard_flag, placement_types._StridedShard",
               "sim: a foreach op's sharding found without scanning every input once per output"),
    PrivateApi("fsdp_offload_targets", "torch.distributed.fsdp._fully_shard: "
               "FSDPParam._init_sharded_param, _fsdp_param_group.foreach_reduce, "
               "FSDPParamGroup._validate_no_meta_params / _validate_cpu_offload_params",
               "sim: FSDP2's CPUOffloadPolicy moves shards and gradients to the host"),
    PrivateApi("parse_to", "torch._C._nn._parse_to", "sim: the device a Tensor.to call names"),
    PrivateApi("cpu_current_stream / cpu_default_stream",
               "torch.cpu._current_stream, torch.cpu._default_cpu_stream",
               "sim: the stream FSDP2 selected (torch.cpu streams stand for CUDA's)"),
    PrivateApi("allocator_settings_targets",
               "torch._C._accelerator_setAllocatorSettings (>= 2.9), "
               "torch.cuda.memory._set_allocator_settings (2.1-2.8)",
               "allocator settings at run time (lesson 17)"),
    PrivateApi("clear_cublas_workspaces", "torch._C._cuda_clearCublasWorkspaces",
               "a second attempt in one process measures as a fresh one"),
    PrivateApi("record_memory_history / stop_memory_history / memory_snapshot",
               "torch.cuda.memory._record_memory_history, torch.cuda.memory._snapshot",
               "the caching allocator's own event history (stacks='python')"),
    # the CUDA facade: a user's CUDA script in sim (lab/measure/sim/cuda_facade.py)
    PrivateApi("DataDependentOutputException / DynamicOutputShapeException",
               "torch._subclasses.fake_tensor", "what FakeTensor raises for an op that reads "
               "values or sizes its output by them: refused in one line"),
    PrivateApi("tree_unflatten", "torch.utils._pytree.tree_unflatten",
               "sim's evaluation cap rebuilds a forward's outputs from their shapes"),
    PrivateApi("default_device / set_default_device_marker / device_constructors",
               "torch.utils._device.CURRENT_DEVICE, torch.utils._device._device_constructors",
               "where a factory without a device puts its tensor (set_default_device('cuda'))"),
    PrivateApi("generator_base", "torch._C.Generator", "torch.Generator(device='cuda') in sim"),
    PrivateApi("set_cpu_current_stream", "torch.cpu._current_stream",
               "torch.cuda.set_stream in sim selects a torch.cpu stream"),
    PrivateApi("single_process_dataloader_iter",
               "torch.utils.data.dataloader._SingleProcessDataLoaderIter",
               "sim runs a DataLoader's workers in the process"),
]


# ---- fake tensors: the dispatch cache's key -------------------------------------------------------
# FakeTensorMode caches an op's output metadata under a key made of the op and its arguments, each
# fake tensor flattened into its metadata (`extract_tensor_metadata(t)._flatten_into(...)`). On a
# cache hit, building that key is about half of the op's time in sim, most of it Python overhead
# (a dataclass per tensor, `dataclasses.fields`, an isinstance chain per element). For the
# arguments sim passes (plain fake tensors of this mode, with concrete sizes, and Python scalars)
# `_fast_key` appends the very same items, in the same order, to the same list; anything else
# (symbolic sizes, constants, sparse layouts, subgraphs, other objects) goes the stock way.
# `fast_key_agrees()` checks that on sample arguments before the fast way is used: a torch whose
# key differs (another field, another order) gets the stock one.
_CONTAINERS = (list, tuple, dict, torch.Size)
_SCALARS = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                      torch.memory_format})
_LENGTHS = [f"length_{n}" for n in range(65)]


class _StockKey(Exception):
    """An argument the fast key does not cover: the stock `_prep_args_for_hash` takes it."""


def _fast_tensor_key(result: list, t, mode) -> None:
    """`extract_tensor_metadata(t)._flatten_into(result, mode, state)` for a strided fake tensor
    of `mode` without symbolic sizes or a constant (TensorMetadata's fields, in order)."""
    if t.fake_mode is not mode or t.constant is not None or t.layout is not torch.strided \
            or t._has_symbolic_sizes_strides:
        raise _StockKey
    shape, stride = t.shape, t.stride()
    n = len(shape)
    if n == 4 or n == 5:  # suggest_memory_format only tells channels_last apart at 4 / 5 dims
        from torch._prims_common import suggest_memory_format

        memory_format = suggest_memory_format(t)
        if not t.is_contiguous(memory_format=memory_format):
            memory_format = None
    else:
        memory_format = torch.contiguous_format if t.is_contiguous() else None
    append = result.append
    append(t.dtype)
    append(torch.Size)
    append(_LENGTHS[n])
    for d in shape:  # concrete ints (no symbolic sizes, checked above)
        append(int)
        append(d)
    append(tuple)
    append(_LENGTHS[n])
    for s in stride:
        append(int)
        append(s)
    # t.device is a property that answers meta inside a kernel, else its fake device
    result.extend((_META if mode.in_kernel_invocation else t.fake_device, torch.strided,
                   memory_format, t.storage_offset(),
                   t.untyped_storage().nbytes(), t.requires_grad, t.is_quantized, t.is_conj(),
                   t.is_neg(), t.is_inference(), False, None, None, None))


def _fast_key(result: list, args, mode) -> None:
    """FakeTensorMode._prep_args_for_hash(result, args, ...) for sim's usual arguments."""
    if isinstance(args, _CONTAINERS[:3]):
        n = len(args)  # long lists too: a foreach op's (one tensor per parameter)
        result.append(type(args))
        result.append(_LENGTHS[n] if n < len(_LENGTHS) else f"length_{n}")
        if isinstance(args, dict):
            _fast_key(result, args.keys(), mode)
            _fast_key(result, args.values(), mode)
            return
    for arg in args:
        kind = type(arg)
        if kind is FakeTensor:
            _fast_tensor_key(result, arg, mode)
        elif kind in _SCALARS:
            result.append(kind)
            result.append(arg)
        elif kind in _CONTAINERS:
            _fast_key(result, arg, mode)
        else:
            raise _StockKey


class SimFakeTensorMode(FakeTensorMode):
    """FakeTensorMode with the dispatch cache's key built the fast way where it agrees, and a
    cache hit's output tensor made the lean way where that agrees (`_lean_output`)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # TorchDispatchMode wraps a subclass's __torch_dispatch__ in torch._disable_dynamo unless
        # this says no (~3 us an op); sim never runs Dynamo: torch.compile is eager there
        # (lab/profile/compiled.py), as in the tracker
        return False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # checked here, before the mode is entered (the checks make fake tensors of their own)
        self.fast_key = self.shape_env is None and fast_key_agrees()
        self._lean_attrs: dict = {}  # device -> the Python attributes of its fresh fake tensors
        self.lean_output = self.fast_key and lean_output_agrees()
        if self.lean_output:
            inference_views_agree()
            unsafe_views_agree()
            direct_key_agrees()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # FakeTensorMode.__torch_dispatch__ and .dispatch straight to the cache, less what they
        # do besides for sim's ops: a call counter (debug statistics) and a debug log line under
        # no_dispatch(), which cost ~5 % of a sim run; ops those handle themselves, and debug
        # logging, take the stock way
        if self.fast_key and self._cache_on() and not _handled_apart(func):
            if _C._get_dispatch_mode(_FAKE_KEY) is not None:
                raise AssertionError(f"FakeTensorMode should not be set when dispatching {func}")
            return self._cached_dispatch_impl(func, types, args, kwargs or {})
        return FakeTensorMode.__torch_dispatch__(self, func, types, args, kwargs or {})

    def cached_answer(self, func, args, kwargs):
        """What `func(*args, **kwargs)` would get from this mode's dispatch cache, made the lean
        way, without the trip through the dispatcher; NO_ANSWER where the op must go the normal
        way (a miss, a bypass, `.item()` of a constant, an output the lean way does not make).
        The key is FakeTensorMode's own: its items, built the fast way where `_fast_key` covers
        the arguments, find the entry's recipe (`_RECIPES`); else `_cache_key` finds the entry.
        Only for the module's `cached_answer` (this mode alone on the stack: nothing traces)."""
        if not self.lean_output or self.cache_crosscheck_enabled or not self._cache_on():
            return NO_ANSWER
        items = _direct_key_items(self, func, args, kwargs) \
            if _DIRECT_KEY_AGREES and _DIRECT_KEY_AGREES[0] else None
        recipe = _RECIPES.get(items) if items is not None else None
        if recipe is None:
            return self._first_answer(func, args, kwargs, items)
        return _answer(self, recipe, args)

    def _first_answer(self, func, args, kwargs, items):
        """`cached_answer` for a key without a recipe yet: FakeTensorMode's own key and entry;
        the recipe is kept when the key's items were built the fast way (`items`)."""
        if func is _LOCAL_SCALAR or _handled_apart(func):
            return NO_ANSWER
        if items is not None:  # `_cache_key`'s own items (direct_key_agrees): not built again
            key = _fake_tensor._DispatchCacheKey(items)
        else:
            try:
                key = self._cache_key(_fake_tensor._CacheKeyState(self.shape_env), func, args,
                                      kwargs or {})
            except _fake_tensor._BypassDispatchCache:
                return NO_ANSWER
        if func is _UNSAFE_VIEW:  # not in the cache: in sim's table, a hit only
            out = _unsafe_view_hit(self, key, args, kwargs)
            return NO_ANSWER if out is None else out
        entry = FakeTensorMode.cache.get(key)
        if type(entry) is not _fake_tensor._DispatchCacheValidEntry:
            return NO_ANSWER  # a miss or a bypass: the normal way records or counts it
        recipe = _recipe(func, entry)
        if recipe is None:
            return NO_ANSWER
        if items is not None:
            _RECIPES[items] = recipe
        return _answer(self, recipe, args)

    def _cache_on(self) -> bool:
        """Does FakeTensorMode.dispatch use its cache, with nothing to log? (`_handled_apart`
        names the ops it answers otherwise.)"""
        return self.cache_enabled and not _fake_tensor.log.isEnabledFor(logging.DEBUG)

    def _get_output_tensor_from_cache_entry(self, state, entry, key, func, args):
        if self.lean_output:
            out = _lean_output(self, entry, func, args)
            if out is not None:
                return out
        return super()._get_output_tensor_from_cache_entry(state, entry, key, func, args)

    def _cached_dispatch_impl(self, func, types, args, kwargs):
        if func is _LOCAL_SCALAR and self.fast_key and not kwargs and len(args) == 1:
            t = args[0]
            if type(t) is FakeTensor and t.fake_mode is self and t.constant is not None \
                    and not t._has_symbolic_sizes_strides:
                # `.item()` of a constant (Adam's step counts: one per parameter and step): what
                # _dispatch_impl answers for an op whose inputs are all constants, without the
                # stock key (a constant is a bypass) and the trip through _dispatch_impl
                with no_dispatch():
                    return func(t.constant)
        if func is _UNSAFE_VIEW and self.lean_output and _unsafe_views_on():
            out = _unsafe_view(self, func, types, args, kwargs)
            if out is not None:
                return out
        return super()._cached_dispatch_impl(func, types, args, kwargs)

    def _prep_args_for_hash(self, result, args, state, id_hashed_objects):
        if self.fast_key:
            start = len(result)
            try:
                return _fast_key(result, args, self)
            except _StockKey:
                del result[start:]
        return super()._prep_args_for_hash(result, args, state, id_hashed_objects)


def _key_samples() -> list:
    """Arguments of the kinds sim passes: views, offsets, zero strides, channels_last, complex
    conjugates, gradients, inference tensors, scalars, nested lists and keyword dicts."""
    x = torch.empty(3, 4)
    img = torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        inf = torch.empty(2, dtype=torch.bfloat16)
    tensors = [x, x.t(), x[1:], x[:, ::2], x.unsqueeze(0).expand(2, 3, 4), img, img[:, :, 1:],
               torch.empty(2, 3, 4, 5, 6), torch.empty(0), torch.empty(()),
               torch.empty(3, requires_grad=True), torch.empty(2, dtype=torch.complex64).conj(),
               inf, torch.empty(5, dtype=torch.int64)]
    return [(t,) for t in tensors] + [
        (x, 1, 2.5, True, None, "mean"), (x, [0, 1], (x.t(), [x, 2])), (torch.Size([3, 4]),),
        (x, torch.float16, torch.device("cpu"), torch.strided, torch.contiguous_format),
        ([x, x.t()] * 40, [1.0] * 80),  # a foreach op's lists, longer than _LENGTHS
        {"dim": [1], "keepdim": False, "dtype": torch.float32, "out": x}]


def _handled_apart(func) -> bool:
    """An op FakeTensorMode.dispatch hands to a handler of its own, not to its cache."""
    return (func in _fake_tensor._DISPATCH_META_HANDLERS
            or func in _fake_tensor._DISPATCH_HANDLE_DIRECTLY)


_LOCAL_SCALAR = torch.ops.aten._local_scalar_dense.default
_UNSAFE_VIEW = torch.ops.aten._unsafe_view.default


# ---- fake tensors: a cache hit without the trip through the dispatcher -------------------------
# A tracked sim op goes tracker -> dispatcher -> FakeTensorMode: the tracker's `func(*args)` makes
# the dispatcher parse the arguments again, find the next mode, pop it, build args/kwargs again
# and call it. When that next mode can only be sim's fake mode (it is the one mode left on the
# stack) and the op is a plain hit of its dispatch cache, the tracker asks the mode for the
# answer directly: the same key (`_cache_key` of the same arguments: the dispatcher hands the
# fake mode the args/kwargs it handed the tracker), the same entry, the same output.
NO_ANSWER = object()
_FAKE_KEY = _C._TorchDispatchModeKey.FAKE


def cached_answer(func, args, kwargs):
    """For a mode's __torch_dispatch__ about to call `func(*args, **kwargs)`: the answer sim's
    fake mode would give from its cache when it is the only mode left to reach, else NO_ANSWER."""
    mode = _C._get_dispatch_mode(_FAKE_KEY)
    if type(mode) is not SimFakeTensorMode or _C._len_torch_dispatch_stack() != 1:
        return NO_ANSWER
    # with subclasses' __torch_function__ off: otherwise each read of a fake tensor's metadata
    # (stride(), is_conj(), untyped_storage(), ...) first looks FakeTensor's up (Tensor's own,
    # which answers the same): ~0.3 us a read, ~20 reads an op; the key items are the same
    with _C.DisableTorchFunctionSubclass():
        return mode.cached_answer(func, args, kwargs)


# ---- fake tensors: a cache hit's output --------------------------------------------------------
# On a hit, FakeTensorMode makes the output from the cached metadata: an empty meta tensor under
# `in_kernel_invocation_manager` (a generator context manager), then `FakeTensor(mode, empty,
# device)`, whose __new__ checks its arguments, normalises the device and sets a dozen Python
# attributes one by one (the memo descriptors). ~20 % of a sim run. For the outputs sim makes
# (strided, concrete sizes, CPU device, no conj/neg bit) `_lean_output` does the same steps in
# line: the same guards, the same `empty_strided` (and `set_` onto the input's storage for a view
# op), the same `Tensor._make_subclass` call, and the attributes a stock FakeTensor of that
# device carries copied in one go. `lean_output_agrees` compares both ways on sample ops before
# the lean way is used.
def _lean_attrs(mode, device) -> dict:
    """The Python attributes FakeTensor.__new__ gives a fresh fake tensor of `mode` on `device`
    (its device, its mode, no constant, the memos empty), read off one made the stock way."""
    attrs = mode._lean_attrs.get(device)
    if attrs is None:
        with _C._DisableTorchDispatch():
            elem = torch.empty(0, device="meta")
        attrs = dict(vars(FakeTensor(mode, elem, device)))
        mode._lean_attrs[device] = attrs
    return attrs


def _lean_output(mode, entry, func, args):
    """The output tensor of cache entry `entry` (a _DispatchCacheEntryOutputInfo), made as
    FakeTensorMode._get_output_tensor_from_cache_entry makes it; None where the stock way must
    (symbolic sizes, another layout or device, in-place and constant outputs, debug mode)."""
    if entry.metadata is None or entry.inplace_idx is not None:
        return None
    view_arg = None
    if isinstance(func, torch._ops.OpOverload) and func.is_view:
        view_arg = args[entry.view_idx]
        if type(view_arg) is not FakeTensor:
            return None
    return _lean_tensor(mode, entry.metadata, view_arg)


def _lean_tensor(mode, md, view_arg=None):
    """A fresh fake tensor of `mode` with metadata `md` (a TensorMetadata), on the storage of
    `view_arg` if given; None where the stock way must make it."""
    plan = _LEAN_PLANS.get(id(md))
    if plan is None or plan[0] is not md:
        plan = _LEAN_PLANS[id(md)] = (md, _leanable(md))
    return _leaned(mode, md, view_arg) if plan[1] else None


def _leaned(mode, md, view_arg=None):
    """`_lean_tensor` for metadata `_leanable` said yes to."""
    if view_arg is not None and not view_arg.is_inference() and torch.is_inference_mode_enabled():
        # Under inference_mode a view of a normal tensor (a weight's .t() in a decode loop) is
        # a normal tensor, as the kernel makes it; the stock way makes an inference tensor, sees
        # the dispatch keys differ and never caches views there (lesson 16: 10k of its 14.6k
        # slow dispatches). Made outside inference mode, it is what the kernel makes
        # (`inference_views_agree` checks that on sample views before sim relies on it).
        if not _INFERENCE_VIEWS or _INFERENCE_VIEWS[0] is False:
            return None
        with torch.inference_mode(False):
            return _leaned(mode, md, view_arg)
    if mode.in_kernel_invocation or _C._meta_in_tls_dispatch_include() or FakeTensorConfig.debug:
        return None  # the stock way (and its checks)
    # FakeTensorMode makes the meta tensor under in_kernel_invocation_manager (the meta key in
    # TLS, the mode told it is inside a kernel); for these two C++ calls on a meta tensor, with
    # Python dispatch off, neither changes anything (lean_output_agrees compares the results)
    with _C._DisableTorchDispatch():
        empty = torch.empty_strided(md.shape, md.stride, dtype=md.dtype, device=_META,
                                    requires_grad=md.requires_grad)
        if view_arg is not None:
            empty.set_(view_arg.untyped_storage(), md.storage_offset, md.shape, md.stride)
    attrs = _lean_attrs(mode, md.device)
    out = torch.Tensor._make_subclass(FakeTensor, empty, empty.requires_grad,
                                      dispatch_device=True,
                                      device_for_backend_keys=attrs["_fake_device"])
    if not mode._allow_unsafe_data_ptr_access:
        _C._set_throw_on_mutable_data_ptr(out)
    else:
        _C._set_warn_deprecated_on_mutable_data_ptr(out)
    out.__dict__.update(attrs)
    return out


# ---- fake tensors: a cache hit's answer from its recipe -------------------------------------------
# `cached_answer` builds FakeTensorMode's key items itself (`_direct_key_items`: the header
# `_cache_key` puts first, then the arguments the fast way) and keeps, per key, how to make the
# hit's outputs from its entry (`_recipe`): which outputs are constants, which are inputs (in-place
# ops), which are new tensors of which metadata, on whose storage. A second hit of the key then
# skips `_cache_key` (its state object, the proxy-mode lookup, the key object's hash and compare)
# and the entry's checks. A recipe is what the entry says, and an entry never changes for its key
# (a cleared cache makes the same entry again). `direct_key_agrees` checks the header against
# `_cache_key` on sample ops before the recipes are used.
_RECIPES: dict[tuple, tuple] = {}  # key items -> (is the output a tuple, its outputs' steps)
_CONSTANT, _INPUT, _NEW = "constant", "input", "new"


def _direct_key_items(mode, func, args, kwargs):
    """The items of `mode._cache_key(state, func, args, kwargs)` for a mode without a shape env,
    with nothing tracing (the mode alone on the dispatch stack), as a tuple; None where
    `_fast_key` does not cover the arguments."""
    items = [func, torch.get_default_dtype(), _C._get_default_device(),
             torch.is_inference_mode_enabled(), None, False]
    try:
        if args:
            _fast_key(items, args, mode)
        if kwargs:
            _fast_key(items, kwargs, mode)
    except _StockKey:
        return None
    return tuple(items)


def _recipe(func, entry):
    """(is_output_tuple, steps) for a valid cache entry whose outputs `_answer` can make, as
    FakeTensorMode._get_output_tensor_from_cache_entry reads them; None otherwise."""
    view = isinstance(func, torch._ops.OpOverload) and func.is_view
    steps = []
    for info in entry.output_infos:
        if info.inplace_idx is None and info.metadata is None and info.view_idx is None:
            if info.constant_value is _fake_tensor.SingletonConstant:
                return None
            steps.append((_CONSTANT, info.constant_value, None))
        elif info.inplace_idx is not None:
            steps.append((_INPUT, info.inplace_idx, None))
        elif info.metadata is not None and _leanable(info.metadata):
            steps.append((_NEW, info.metadata, info.view_idx if view else None))
        else:
            return None
    return entry.is_output_tuple, tuple(steps)


def _answer(mode, recipe, args):
    """The outputs `recipe` describes for `args`; NO_ANSWER where the stock way must make them."""
    is_tuple, steps = recipe
    outs = []
    for kind, what, view_idx in steps:
        if kind is _NEW:
            view_arg = None
            if view_idx is not None:
                view_arg = args[view_idx]
                if type(view_arg) is not FakeTensor:
                    return NO_ANSWER
            out = _leaned(mode, what, view_arg)
            if out is None:
                return NO_ANSWER
        elif kind is _INPUT:
            out = args[what]
            if type(out) is not FakeTensor:
                return NO_ANSWER
        else:
            out = what
        outs.append(out)
    FakeTensorMode.cache_hits += 1
    return tuple(outs) if is_tuple else outs[0]


_DIRECT_KEY_AGREES: list[bool] = []  # direct_key_agrees()'s answer, once asked


def direct_key_agrees() -> bool:
    """Are `_direct_key_items` the items of FakeTensorMode's own `_cache_key` for sample ops
    (this torch)? Checked once per process; until then, and if not, no recipe is used."""
    if _DIRECT_KEY_AGREES:
        return _DIRECT_KEY_AGREES[0]
    _DIRECT_KEY_AGREES.append(False)  # while checking (its modes ask too), and if it fails

    def check() -> bool:
        mode = SimFakeTensorMode(allow_non_fake_inputs=True)
        if not mode.fast_key:
            return False
        with mode:
            x, w = torch.empty(3, 4), torch.empty(3, 4, requires_grad=True)
        samples = [(torch.ops.aten.add.Tensor, (x, w), {}),
                   (torch.ops.aten.sum.dim_IntList, (x, [1]), {"keepdim": True}),
                   (torch.ops.aten.t.default, (w,), {}),
                   (torch.ops.aten.empty.memory_format, ([2, 3],), {"dtype": torch.bfloat16})]
        for inference in (False, True):
            with torch.inference_mode(inference):
                for func, args, kwargs in samples:
                    stock = mode._cache_key(_fake_tensor._CacheKeyState(None), func, args, kwargs)
                    mine = _direct_key_items(mode, func, args, kwargs)
                    if mine != stock.key or [type(a) for a in mine] != [type(b) for b in stock.key]:
                        return False
        return True

    _DIRECT_KEY_AGREES[0] = _on_samples(check)
    return _DIRECT_KEY_AGREES[0]


_META = torch.device("meta")
# id(metadata) -> (that metadata, can the lean way make it): a cache entry's metadata is read on
# every hit, so its checks are made once; the entry is kept here, so its id is never reused
_LEAN_PLANS: dict[int, tuple] = {}


def _leanable(md) -> bool:
    """Strided, concrete sizes, CPU, no conj/neg bit: what `_lean_tensor` makes."""
    return (md.layout is torch.strided and md.device.type == "cpu" and not md.is_conj
            and not md.is_neg and type(md.storage_offset) is int
            and all(type(v) is int for v in md.shape) and all(type(v) is int for v in md.stride))


def _describe(t) -> tuple:
    """What a fake tensor is, for `lean_output_agrees`: its metadata, its dispatch keys, its
    Python attributes, and which storage it uses."""
    return (type(t), t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad,
            t.is_leaf, t.untyped_storage().nbytes(), _C._dispatch_keys(t), sorted(vars(t).items(),
            key=lambda kv: kv[0]), t.is_inference(), t._is_view())


def _lean_samples(x, w):
    """Ops of the kinds sim runs: new tensors, views (their storage is the input's), tuples of
    outputs, outputs that require grad, other dtypes."""
    return [lambda: x + 1, lambda: x.t(), lambda: x[1:], lambda: x.view(12),
            lambda: x.unsqueeze(0).expand(2, 3, 4), lambda: torch.mm(x, x.t()),
            lambda: x.sum(0), lambda: x.chunk(2, dim=1), lambda: x.to(torch.bfloat16),
            lambda: w * 2, lambda: w.t(), lambda: torch.empty_strided((2, 3), (1, 2)),
            lambda: x.max(dim=1)]


_LEAN_AGREES: list[bool] = []
_INFERENCE_VIEWS: list = []  # inference_views_agree's answer: [True] | [False] | ["checking"]


def inference_views_agree() -> bool:
    """Under inference_mode, is a cache hit's view of a normal tensor (made the lean way, outside
    inference mode) the tensor the op's kernel made on the miss? Checked once per process, on a
    mode of its own with a private cache, for views of normal and of inference tensors."""
    if not _INFERENCE_VIEWS:
        _INFERENCE_VIEWS.append("checking")  # the views below take the lean way to be compared
        _INFERENCE_VIEWS[0] = _on_samples(_inference_views_check)
    return _INFERENCE_VIEWS[0] is True


# ---- fake tensors: _unsafe_view ------------------------------------------------------------------
# FakeTensorMode never caches aten._unsafe_view (matmul's last step: every Linear without a bias
# on a 3-d input): its output shares its input's storage, but its schema does not say it is a
# view, so a cache hit would give it a storage of its own. Every call took the slow way, a Python
# decomposition (lesson 16: 3,729 of them, ~6 % of its run). Sim keeps the stock output's
# metadata under the stock key in a table of its own and makes a hit the lean way *as a view of
# the input* (`set_` onto its storage), which is what the decomposition makes;
# `unsafe_views_agree` checks that once per process.
_UNSAFE_VIEWS: dict = {}  # the stock key -> the stock output's TensorMetadata
_UNSAFE_VIEWS_OK: list = []  # unsafe_views_agree's answer: [True] | [False] | ["checking"]


def _unsafe_view(mode, func, types, args, kwargs):
    """aten._unsafe_view from sim's table, or on a miss the stock way, remembered; None where
    only the stock way may answer (symbolic sizes, another device, a normal tensor's view under
    inference_mode)."""
    src = _unsafe_view_source(mode, args, kwargs)
    if src is None:
        return None
    try:
        key = mode._cache_key(_fake_tensor._CacheKeyState(mode.shape_env), func, args, kwargs)
    except _fake_tensor._BypassDispatchCache:
        return None
    hit = _unsafe_view_hit(mode, key, args, kwargs)
    if hit is not None:
        return hit
    out = mode._dispatch_impl(func, types, args, kwargs)
    if type(out) is FakeTensor and not out._has_symbolic_sizes_strides and \
            out.untyped_storage()._cdata == src.untyped_storage()._cdata:
        _UNSAFE_VIEWS[key] = _fake_tensor.extract_tensor_metadata(out)
    return out


def _unsafe_views_on() -> bool:
    """Sim's _unsafe_view table in use: `unsafe_views_agree` said yes, or is checking it."""
    return bool(_UNSAFE_VIEWS_OK) and _UNSAFE_VIEWS_OK[0] is not False


def _unsafe_view_hit(mode, key, args, kwargs):
    """The _unsafe_view sim's table holds for `key`, made as a view of its input; None on a miss,
    before `unsafe_views_agree` said yes, or where only the stock way may answer."""
    md = _UNSAFE_VIEWS.get(key) if _unsafe_views_on() else None
    src = _unsafe_view_source(mode, args, kwargs) if md is not None else None
    return _lean_tensor(mode, md, src) if src is not None else None


def _unsafe_view_source(mode, args, kwargs):
    """The input of `aten._unsafe_view(args)` where sim's table may answer for it, else None."""
    src = args[0] if len(args) == 2 and not kwargs else None
    if type(src) is not FakeTensor or src.fake_mode is not mode or (
            torch.is_inference_mode_enabled() and not src.is_inference()):
        return None
    return src


def unsafe_views_agree() -> bool:
    """Is an _unsafe_view made from sim's table (a view of its input, the lean way) the tensor
    the stock way makes? Checked once per process, on a mode of its own, for normal tensors,
    tensors that require grad, and inference tensors under inference_mode."""
    if not _UNSAFE_VIEWS_OK:
        _UNSAFE_VIEWS_OK.append("checking")  # the calls below take sim's way to be compared
        saved = dict(_UNSAFE_VIEWS)
        try:
            _UNSAFE_VIEWS_OK[0] = _on_samples(_unsafe_views_check)
        finally:
            _UNSAFE_VIEWS.clear()  # the samples' entries are not sim's
            _UNSAFE_VIEWS.update(saved)
    return _UNSAFE_VIEWS_OK[0] is True


def _unsafe_views_check() -> bool:
    mode = SimFakeTensorMode(allow_non_fake_inputs=True)
    if not mode.lean_output:
        return False
    with mode:
        x = torch.empty(6, 4)
        w = torch.empty(6, 4, requires_grad=True)
        with torch.inference_mode():
            inf = torch.empty(2, 3, 4)
        cases = [(lambda: x, [2, 3, 4], False), (lambda: x[1:], [5, 4], False),
                 (lambda: w, [24], False), (lambda: x.t(), [4, 6], False),
                 (lambda: inf, [6, 4], True), (lambda: inf[:, 1:], [2, 8], True)]
        for make, size, inference in cases:
            with torch.inference_mode(inference):
                t = make()
                stock = _UNSAFE_VIEW(t, size)  # a miss: the stock way, remembered
                lean = _UNSAFE_VIEW(t, size)  # a hit: sim's way
            if not _UNSAFE_VIEWS or _describe(stock) != _describe(lean) or \
                    lean.untyped_storage()._cdata != t.untyped_storage()._cdata:
                return False
    return True


def _on_samples(check) -> bool:
    """Run a once-per-process check of sim's fake-tensor shortcuts against the stock way: no
    mode of the caller's on, a private dispatch cache (the samples' entries are not sim's, and
    sim's cache is left as it was); a torch without these internals answers False."""
    try:
        with _python_dispatch._disable_current_modes():
            saved = FakeTensorMode.cache
            FakeTensorMode.cache = {}
            try:
                return check()
            finally:
                FakeTensorMode.cache = saved
    except Exception:
        return False


def _inference_views_check() -> bool:
    with SimFakeTensorMode(allow_non_fake_inputs=True):
        w = torch.empty(3, 4, requires_grad=True)
        with torch.inference_mode():
            x = torch.empty(3, 4)
            for t in (w, x):
                for fn in (lambda: t.t(), lambda: t.view(12), lambda: t[1:],
                           lambda: t.unsqueeze(0).expand(2, 3, 4)):
                    miss, hit = fn(), fn()  # the kernel's, then the cache's
                    if _describe(miss) != _describe(hit) or (
                            hit.untyped_storage()._cdata != t.untyped_storage()._cdata):
                        return False
    return True


def lean_output_agrees() -> bool:
    """Does `_lean_output` make the tensor the stock way makes, for the sample ops (this torch)?
    Checked once per process, on a mode of its own."""
    if not _LEAN_AGREES:
        _LEAN_AGREES.append(False)  # while checking, and if the check fails: the stock way
        if fast_key_agrees():
            _LEAN_AGREES[0] = _lean_check(SimFakeTensorMode(allow_non_fake_inputs=True))
    return _LEAN_AGREES[0]


def _lean_check(mode) -> bool:
    """Each sample op runs twice with the lean way off (a miss, then a stock hit) and once with
    it on (a lean hit); the two hits must be alike, down to which outputs share an input's
    storage."""
    def check() -> bool:
        mode.lean_output = False
        with mode:
            x = torch.empty(3, 4)
            w = torch.empty(3, 4, requires_grad=True)
            inputs = {x.untyped_storage()._cdata: "x", w.untyped_storage()._cdata: "w"}

            def described(fn):
                out = fn()
                outs = out if isinstance(out, tuple) else (out,)
                return [(_describe(o), inputs.get(o.untyped_storage()._cdata)) for o in outs]

            for fn in _lean_samples(x, w):
                described(fn)  # a miss: fills the cache
                stock = described(fn)
                mode.lean_output = True
                try:
                    lean = described(fn)
                finally:
                    mode.lean_output = False
                if lean != stock:
                    return False
        return True

    return _on_samples(check)


_AGREES: list[bool] = []


def fast_key_agrees() -> bool:
    """Does the fast key give FakeTensorMode's own key for the sample arguments (this torch)?"""
    if not _AGREES:
        try:
            from torch._subclasses._fake_tensor_utils import _CacheKeyState

            _AGREES.append(False)  # while checking, and if the check fails: the stock key
            with _python_dispatch._disable_current_modes(), \
                    FakeTensorMode(allow_non_fake_inputs=True) as mode:
                samples = _key_samples()
            for args in samples:
                fast: list = []
                _fast_key(fast, args, mode)
                stock: list = []
                FakeTensorMode._prep_args_for_hash(mode, stock, args, _CacheKeyState(None), [])
                if fast != stock or [type(a) for a in fast] != [type(b) for b in stock]:
                    break
            else:
                _AGREES[0] = True
        except Exception:  # a torch without these internals: the stock key
            pass
    return _AGREES[0]


# ---- dispatch and pytrees ----------------------------------------------------------------------
TorchDispatchMode = _python_dispatch.TorchDispatchMode
is_traceable_wrapper_subclass = _python_dispatch.is_traceable_wrapper_subclass
is_traceable_wrapper_subclass_type = _python_dispatch.is_traceable_wrapper_subclass_type
disable_current_modes = _python_dispatch._disable_current_modes
tree_flatten = _pytree.tree_flatten


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


def dtensor_strided_flag_target() -> tuple[Any, str, type] | None:
    """(the _sharding_prop module, "_propagate_use_strided_shard_flag", _StridedShard) where
    this torch's DTensor has them (read in 2.13), else None."""
    try:
        from torch.distributed.tensor import _sharding_prop
        from torch.distributed.tensor.placement_types import _StridedShard
    except ImportError:
        return None
    name = "_propagate_use_strided_shard_flag"
    return (_sharding_prop, name, _StridedShard) if callable(getattr(_sharding_prop, name, None)) \
        else None


def fsdp_offload_targets() -> tuple[Any, Any, Any] | None:
    """(FSDPParam, the _fsdp_param_group module, FSDPParamGroup) when FSDP2 has every name sim's
    CPU offload wraps (lab/measure/sim/fsdp_offload.py; read in torch 2.13), else None."""
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
    """The stream device-agnostic code selected on torch.cpu (FSDP2's streams, in sim); asked
    at every allocation sim models."""
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
    fn: Callable | None = getattr(_C, "_cuda_clearCublasWorkspaces", None)
    if fn is not None:
        fn()


def record_memory_history(max_entries: int) -> None:
    """Start the allocator's history with Python stacks only (C++ stacks make snapshots slow;
    torchtitan's profiler says the same). The signature changed in 2.1."""
    fn = torch.cuda.memory._record_memory_history
    params = inspect.signature(fn).parameters
    if "stacks" in params:  # torch >= 2.1
        kwargs: dict[str, Any] = {"stacks": "python"}
        if "max_entries" in params:
            kwargs["max_entries"] = max_entries
        fn(enabled="all", **kwargs)
    else:  # torch 2.0
        fn(True, trace_alloc_max_entries=max_entries, trace_alloc_record_context=True)


def stop_memory_history() -> None:
    fn = torch.cuda.memory._record_memory_history
    if "stacks" in inspect.signature(fn).parameters:
        fn(enabled=None)
    else:
        fn(False)


def memory_snapshot() -> dict:
    """The allocator's segments and its event history (what `_dump_snapshot` pickles)."""
    return torch.cuda.memory._snapshot()


# ---- the CUDA facade (a user's CUDA script in sim) ------------------------------------------------
def fake_exceptions() -> tuple[type, type]:
    """(what FakeTensor raises for an op that reads values, ... whose output shape depends on
    values): DataDependentOutputException, DynamicOutputShapeException."""
    from torch._subclasses import fake_tensor

    return fake_tensor.DataDependentOutputException, fake_tensor.DynamicOutputShapeException


tree_unflatten = _pytree.tree_unflatten


def default_device():
    """The device `torch.set_default_device` / `with torch.device(...)` made current, or None."""
    import torch.utils._device as device_mod

    return getattr(device_mod, "CURRENT_DEVICE", None)


def set_default_device_marker(device) -> None:
    """Put the module's record of the current default device back (torch.utils.checkpoint's
    recomputation re-enters the global DeviceContext, which then restores the wrong one)."""
    import torch.utils._device as device_mod

    if hasattr(device_mod, "CURRENT_DEVICE"):
        device_mod.CURRENT_DEVICE = device


def device_constructors() -> set:
    """The factories a default device applies to (torch.utils._device's list)."""
    import torch.utils._device as device_mod

    fn = getattr(device_mod, "_device_constructors", None)
    return set(fn()) if callable(fn) else set()


generator_base = _C.Generator


def set_cpu_current_stream(stream) -> None:
    torch.cpu._current_stream = stream


def single_process_dataloader_iter():
    from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

    return _SingleProcessDataLoaderIter


__all__ = ["CHECKED", "CHECKED_ON", "aten_ops_with_kernel", "current_dispatch_modes",
           "exclude_autocast_cpu", "ddp_bucket_sizes", "ddp_param_shape_check", "fake_store", "fsdp_chunk_target",
           "dtensor_strided_flag_target",
           "fsdp_offload_targets", "parse_to",
           "optimizer_foreach_defaults", "rebuild_buckets", "has_kernel_for",
           "is_traceable_wrapper_subclass_type", "op_schema", "storage_use_count",
           "tensor_use_count", "FakeTensor", "FakeTensorMode", "PrivateApi", "SimFakeTensorMode",
           "fast_key_agrees",
           "TorchDispatchMode", "allocator_settings_targets", "clear_cublas_workspaces",
           "cpu_current_stream", "cpu_default_stream", "current_graph_task_id", "disable_current_modes", "has_composite_implicit_kernel",
           "is_traceable_wrapper_subclass", "memory_snapshot", "record_memory_history",
           "run_composite_implicit", "set_allocator_settings", "stop_memory_history",
           "storage_key", "tree_flatten"]
__all__ += ["default_device", "device_constructors", "fake_exceptions", "generator_base",
            "set_cpu_current_stream", "set_default_device_marker",
            "single_process_dataloader_iter", "tree_unflatten", "push_dispatch_mode",
            "pop_dispatch_mode", "unsafe_views_agree", "cached_answer", "NO_ANSWER",
            "direct_key_agrees"]
