"""A cache hit's output fake tensor, made in line as FakeTensorMode makes it.

On a hit, FakeTensorMode makes the output from the cached metadata: an empty meta tensor under
`in_kernel_invocation_manager` (a generator context manager), then `FakeTensor(mode, empty,
device)`, whose __new__ checks its arguments, normalises the device and sets a dozen Python
attributes one by one (the memo descriptors). ~20 % of a sim run. For the outputs sim makes
(strided, concrete sizes, CPU device, no conj/neg bit) `lean_output` does the same steps in
line: the same guards, the same `empty_strided` (and `set_` onto the input's storage for a view
op), the same `Tensor._make_subclass` call, and the attributes a stock FakeTensor of that
device carries copied in one go.

The checks, once per process, before sim relies on it (lab.measure.sim.dispatch.fake_mode runs
them with a mode of its own): `lean_output_agrees` compares both ways on sample ops;
`inference_views_agree` that a view made the lean way under inference_mode is the kernel's.
`on_samples` and `describe` are those checks' tools (lab.measure.sim.dispatch.unsafe_view's
check uses them too).
"""

from __future__ import annotations

from typing import Callable

import torch

from ...torch_compat import (DisableTorchDispatch, FakeTensor, FakeTensorConfig, FakeTensorMode,
                             OpOverload, disable_current_modes, dispatch_keys, make_subclass,
                             meta_in_tls_dispatch_include, set_throw_on_mutable_data_ptr,
                             set_warn_deprecated_on_mutable_data_ptr, storage_key)
from .fast_key import META, fast_key_agrees

# id(metadata) -> (that metadata, can the lean way make it): a cache entry's metadata is read on
# every hit, so its checks are made once; the entry is kept here, so its id is never reused
_LEAN_PLANS: dict[int, tuple] = {}
INFERENCE_VIEWS: list = []  # inference_views_agree's answer: [True] | [False] | ["checking"]
_LEAN_AGREES: list[bool] = []


def _lean_attrs(mode, device) -> dict:
    """The Python attributes FakeTensor.__new__ gives a fresh fake tensor of `mode` on `device`
    (its device, its mode, no constant, the memos empty), read off one made the stock way."""
    attrs = mode._lean_attrs.get(device)
    if attrs is None:
        with DisableTorchDispatch():
            elem = torch.empty(0, device="meta")
        attrs = dict(vars(FakeTensor(mode, elem, device)))
        mode._lean_attrs[device] = attrs
    return attrs


def lean_output(mode, entry, func, args):
    """The output tensor of cache entry `entry` (a _DispatchCacheEntryOutputInfo), made as
    FakeTensorMode._get_output_tensor_from_cache_entry makes it; None where the stock way must
    (symbolic sizes, another layout or device, in-place and constant outputs, debug mode)."""
    if entry.metadata is None or entry.inplace_idx is not None:
        return None
    view_arg = None
    if isinstance(func, OpOverload) and func.is_view:
        view_arg = args[entry.view_idx]
        if type(view_arg) is not FakeTensor:
            return None
    return lean_tensor(mode, entry.metadata, view_arg)


def lean_tensor(mode, md, view_arg=None):
    """A fresh fake tensor of `mode` with metadata `md` (a TensorMetadata), on the storage of
    `view_arg` if given; None where the stock way must make it."""
    plan = _LEAN_PLANS.get(id(md))
    if plan is None or plan[0] is not md:
        plan = _LEAN_PLANS[id(md)] = (md, leanable(md))
    return leaned(mode, md, view_arg) if plan[1] else None


def leaned(mode, md, view_arg=None):
    """`lean_tensor` for metadata `leanable` said yes to."""
    if view_arg is not None and not view_arg.is_inference() and torch.is_inference_mode_enabled():
        # Under inference_mode a view of a normal tensor (a weight's .t() in a decode loop) is
        # a normal tensor, as the kernel makes it; the stock way makes an inference tensor, sees
        # the dispatch keys differ and never caches views there (lesson 16: 10k of its 14.6k
        # slow dispatches). Made outside inference mode, it is what the kernel makes
        # (`inference_views_agree` checks that on sample views before sim relies on it).
        if not INFERENCE_VIEWS or INFERENCE_VIEWS[0] is False:
            return None
        with torch.inference_mode(False):
            return leaned(mode, md, view_arg)
    if mode.in_kernel_invocation or meta_in_tls_dispatch_include() or FakeTensorConfig.debug:
        return None  # the stock way (and its checks)
    # FakeTensorMode makes the meta tensor under in_kernel_invocation_manager (the meta key in
    # TLS, the mode told it is inside a kernel); for these two C++ calls on a meta tensor, with
    # Python dispatch off, neither changes anything (lean_output_agrees compares the results)
    with DisableTorchDispatch():
        empty = torch.empty_strided(md.shape, md.stride, dtype=md.dtype, device=META,
                                    requires_grad=md.requires_grad)
        if view_arg is not None:
            empty.set_(view_arg.untyped_storage(), md.storage_offset, md.shape, md.stride)
    attrs = _lean_attrs(mode, md.device)
    out = make_subclass(FakeTensor, empty, empty.requires_grad, dispatch_device=True,
                        device_for_backend_keys=attrs["_fake_device"])
    if not mode._allow_unsafe_data_ptr_access:
        set_throw_on_mutable_data_ptr(out)
    else:
        set_warn_deprecated_on_mutable_data_ptr(out)
    out.__dict__.update(attrs)
    return out


def leanable(md) -> bool:
    """Strided, concrete sizes, CPU, no conj/neg bit: what `lean_tensor` makes."""
    return (md.layout is torch.strided and md.device.type == "cpu" and not md.is_conj
            and not md.is_neg and type(md.storage_offset) is int
            and all(type(v) is int for v in md.shape) and all(type(v) is int for v in md.stride))


# ---- the checks (once per process) -------------------------------------------------------------
def describe(t) -> tuple:
    """What a fake tensor is, for the checks: its metadata, its dispatch keys, its Python
    attributes, and which storage it uses."""
    return (type(t), t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad,
            t.is_leaf, t.untyped_storage().nbytes(), dispatch_keys(t), sorted(vars(t).items(),
            key=lambda kv: kv[0]), t.is_inference(), t._is_view())


def on_samples(check: Callable[[], bool]) -> bool:
    """Run a once-per-process check of sim's fake-tensor shortcuts against the stock way: no
    mode of the caller's on, a private dispatch cache (the samples' entries are not sim's, and
    sim's cache is left as it was); a torch without these internals answers False."""
    try:
        with disable_current_modes():
            saved = FakeTensorMode.cache
            FakeTensorMode.cache = {}
            try:
                return check()
            finally:
                FakeTensorMode.cache = saved
    except Exception:
        return False


def _lean_samples(x, w):
    """Ops of the kinds sim runs: new tensors, views (their storage is the input's), tuples of
    outputs, outputs that require grad, other dtypes."""
    return [lambda: x + 1, lambda: x.t(), lambda: x[1:], lambda: x.view(12),
            lambda: x.unsqueeze(0).expand(2, 3, 4), lambda: torch.mm(x, x.t()),
            lambda: x.sum(0), lambda: x.chunk(2, dim=1), lambda: x.to(torch.bfloat16),
            lambda: w * 2, lambda: w.t(), lambda: torch.empty_strided((2, 3), (1, 2)),
            lambda: x.max(dim=1)]


def lean_output_agrees(make_mode: Callable) -> bool:
    """Does `lean_output` make the tensor the stock way makes, for the sample ops (this torch)?
    Checked once per process, on a mode `make_mode()` makes (sim's, with `lean_output`)."""
    if not _LEAN_AGREES:
        _LEAN_AGREES.append(False)  # while checking, and if the check fails: the stock way
        if fast_key_agrees():
            _LEAN_AGREES[0] = _lean_check(make_mode())
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
            inputs = {storage_key(x.untyped_storage()): "x", storage_key(w.untyped_storage()): "w"}

            def described(fn):
                out = fn()
                outs = out if isinstance(out, tuple) else (out,)
                return [(describe(o), inputs.get(storage_key(o.untyped_storage()))) for o in outs]

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

    return on_samples(check)


def inference_views_agree(make_mode: Callable) -> bool:
    """Under inference_mode, is a cache hit's view of a normal tensor (made the lean way, outside
    inference mode) the tensor the op's kernel made on the miss? Checked once per process, on a
    mode `make_mode()` makes with a private cache, for views of normal and of inference tensors."""
    if not INFERENCE_VIEWS:
        INFERENCE_VIEWS.append("checking")  # the views below take the lean way to be compared
        INFERENCE_VIEWS[0] = on_samples(lambda: _inference_views_check(make_mode))
    return INFERENCE_VIEWS[0] is True


def _inference_views_check(make_mode: Callable) -> bool:
    with make_mode():
        w = torch.empty(3, 4, requires_grad=True)
        with torch.inference_mode():
            x = torch.empty(3, 4)
            for t in (w, x):
                for fn in (lambda: t.t(), lambda: t.view(12), lambda: t[1:],
                           lambda: t.unsqueeze(0).expand(2, 3, 4)):
                    miss, hit = fn(), fn()  # the kernel's, then the cache's
                    if describe(miss) != describe(hit) or (
                            storage_key(hit.untyped_storage()) != storage_key(t.untyped_storage())):
                        return False
    return True


__all__ = ["INFERENCE_VIEWS", "describe", "inference_views_agree", "lean_output",
           "lean_output_agrees", "lean_tensor", "leanable", "leaned", "on_samples"]
