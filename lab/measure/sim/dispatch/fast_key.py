"""The dispatch cache's key of sim's fake tensors, built without FakeTensorMode's dataclasses.

FakeTensorMode caches an op's output metadata under a key made of the op and its arguments, each
fake tensor flattened into its metadata (`extract_tensor_metadata(t)._flatten_into(...)`). On a
cache hit, building that key is about half of the op's time in sim, most of it Python overhead
(a dataclass per tensor, `dataclasses.fields`, an isinstance chain per element). For the
arguments sim passes (plain fake tensors of this mode, with concrete sizes, and Python scalars)
`fast_key` appends the very same items, in the same order, to the same list; anything else
(symbolic sizes, constants, sparse layouts, subgraphs, other objects) goes the stock way
(`StockKey`). `fast_key_agrees()` checks that on sample arguments before the fast way is used:
a torch whose key differs (another field, another order) gets the stock one.

`direct_key_items` is the whole key `_cache_key` makes (its header, then the arguments the fast
way), for the tracker's direct answers (lab.measure.sim.dispatch.recipes).
"""

from __future__ import annotations

import torch

from ...torch_compat import (CacheKeyState, FakeTensor, FakeTensorMode, disable_current_modes,
                             fake_cache_available, get_default_device, suggest_memory_format)

_CONTAINERS = (list, tuple, dict, torch.Size)
_SCALARS = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                      torch.memory_format})
_LENGTHS = [f"length_{n}" for n in range(65)]
META = torch.device("meta")


class StockKey(Exception):
    """An argument the fast key does not cover: the stock `_prep_args_for_hash` takes it."""


def fast_tensor_key(result: list, t, mode) -> None:
    """`extract_tensor_metadata(t)._flatten_into(result, mode, state)` for a strided fake tensor
    of `mode` without symbolic sizes or a constant (TensorMetadata's fields, in order)."""
    if t.fake_mode is not mode or t.constant is not None or t.layout is not torch.strided \
            or t._has_symbolic_sizes_strides:
        raise StockKey
    shape, stride = t.shape, t.stride()
    n = len(shape)
    if n == 4 or n == 5:  # suggest_memory_format only tells channels_last apart at 4 / 5 dims
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
    result.extend((META if mode.in_kernel_invocation else t.fake_device, torch.strided,
                   memory_format, t.storage_offset(),
                   t.untyped_storage().nbytes(), t.requires_grad, t.is_quantized, t.is_conj(),
                   t.is_neg(), t.is_inference(), False, None, None, None))


def fast_key(result: list, args, mode) -> None:
    """FakeTensorMode._prep_args_for_hash(result, args, ...) for sim's usual arguments."""
    if isinstance(args, _CONTAINERS[:3]):
        n = len(args)  # long lists too: a foreach op's (one tensor per parameter)
        result.append(type(args))
        result.append(_LENGTHS[n] if n < len(_LENGTHS) else f"length_{n}")
        if isinstance(args, dict):
            fast_key(result, args.keys(), mode)
            fast_key(result, args.values(), mode)
            return
    for arg in args:
        kind = type(arg)
        if kind is FakeTensor:
            fast_tensor_key(result, arg, mode)
        elif kind in _SCALARS:
            result.append(kind)
            result.append(arg)
        elif kind in _CONTAINERS:
            fast_key(result, arg, mode)
        else:
            raise StockKey


def direct_key_items(mode, func, args, kwargs):
    """The items of `mode._cache_key(state, func, args, kwargs)` for a mode without a shape env,
    with nothing tracing (the mode alone on the dispatch stack), as a tuple; None where
    `fast_key` does not cover the arguments."""
    items = [func, torch.get_default_dtype(), get_default_device(),
             torch.is_inference_mode_enabled(), None, False]
    try:
        if args:
            fast_key(items, args, mode)
        if kwargs:
            fast_key(items, kwargs, mode)
    except StockKey:
        return None
    return tuple(items)


def key_samples() -> list:
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


_AGREES: list[bool] = []


def fast_key_agrees() -> bool:
    """Does the fast key give FakeTensorMode's own key for the sample arguments (this torch)?"""
    if not _AGREES:
        _AGREES.append(False)  # while checking, and if the check fails: the stock key
        try:
            if fake_cache_available:
                with disable_current_modes(), FakeTensorMode(allow_non_fake_inputs=True) as mode:
                    samples = key_samples()
                for args in samples:
                    fast: list = []
                    fast_key(fast, args, mode)
                    stock: list = []
                    FakeTensorMode._prep_args_for_hash(mode, stock, args, CacheKeyState(None), [])
                    if fast != stock or [type(a) for a in fast] != [type(b) for b in stock]:
                        break
                else:
                    _AGREES[0] = True
        except Exception:  # a torch without these internals: the stock key
            pass
    return _AGREES[0]


__all__ = ["META", "StockKey", "direct_key_items", "fast_key", "fast_key_agrees",
           "fast_tensor_key", "key_samples"]
