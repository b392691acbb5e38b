"""aten._unsafe_view from a table of sim's own: FakeTensorMode never caches it.

matmul's last step (every Linear without a bias on a 3-d input) is aten._unsafe_view: its output
shares its input's storage, but its schema does not say it is a view, so a cache hit would give
it a storage of its own. Every call took the slow way, a Python decomposition (lesson 16: 3,729
of them, ~6 % of its run). Sim keeps the stock output's metadata under the stock key in a table
of its own and makes a hit the lean way *as a view of the input* (`set_` onto its storage),
which is what the decomposition makes; `unsafe_views_agree` checks that once per process.
"""

from __future__ import annotations

from typing import Callable

import torch

from ...torch_compat import (BypassDispatchCache, CacheKeyState, FakeTensor,
                             extract_tensor_metadata, storage_key)
from .lean_output import describe, lean_tensor, on_samples

UNSAFE_VIEW = torch.ops.aten._unsafe_view.default
_UNSAFE_VIEWS: dict = {}  # the stock key -> the stock output's TensorMetadata
_UNSAFE_VIEWS_OK: list = []  # unsafe_views_agree's answer: [True] | [False] | ["checking"]


def unsafe_view(mode, func, types, args, kwargs):
    """aten._unsafe_view from sim's table, or on a miss the stock way, remembered; None where
    only the stock way may answer (symbolic sizes, another device, a normal tensor's view under
    inference_mode)."""
    src = _unsafe_view_source(mode, args, kwargs)
    if src is None:
        return None
    try:
        key = mode._cache_key(CacheKeyState(mode.shape_env), func, args, kwargs)
    except BypassDispatchCache:
        return None
    hit = unsafe_view_hit(mode, key, args, kwargs)
    if hit is not None:
        return hit
    out = mode._dispatch_impl(func, types, args, kwargs)
    if type(out) is FakeTensor and not out._has_symbolic_sizes_strides and \
            storage_key(out.untyped_storage()) == storage_key(src.untyped_storage()):
        _UNSAFE_VIEWS[key] = extract_tensor_metadata(out)
    return out


def unsafe_views_on() -> bool:
    """Sim's _unsafe_view table in use: `unsafe_views_agree` said yes, or is checking it."""
    return bool(_UNSAFE_VIEWS_OK) and _UNSAFE_VIEWS_OK[0] is not False


def unsafe_view_hit(mode, key, args, kwargs):
    """The _unsafe_view sim's table holds for `key`, made as a view of its input; None on a miss,
    before `unsafe_views_agree` said yes, or where only the stock way may answer."""
    md = _UNSAFE_VIEWS.get(key) if unsafe_views_on() else None
    src = _unsafe_view_source(mode, args, kwargs) if md is not None else None
    return lean_tensor(mode, md, src) if src is not None else None


def _unsafe_view_source(mode, args, kwargs):
    """The input of `aten._unsafe_view(args)` where sim's table may answer for it, else None."""
    src = args[0] if len(args) == 2 and not kwargs else None
    if type(src) is not FakeTensor or src.fake_mode is not mode or (
            torch.is_inference_mode_enabled() and not src.is_inference()):
        return None
    return src


def unsafe_views_agree(make_mode: Callable) -> bool:
    """Is an _unsafe_view made from sim's table (a view of its input, the lean way) the tensor
    the stock way makes? Checked once per process, on a mode `make_mode()` makes, for normal
    tensors, tensors that require grad, and inference tensors under inference_mode."""
    if not _UNSAFE_VIEWS_OK:
        _UNSAFE_VIEWS_OK.append("checking")  # the calls below take sim's way to be compared
        saved = dict(_UNSAFE_VIEWS)
        try:
            _UNSAFE_VIEWS_OK[0] = on_samples(lambda: _unsafe_views_check(make_mode))
        finally:
            _UNSAFE_VIEWS.clear()  # the samples' entries are not sim's
            _UNSAFE_VIEWS.update(saved)
    return _UNSAFE_VIEWS_OK[0] is True


def _unsafe_views_check(make_mode: Callable) -> bool:
    mode = make_mode()
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
                stock = UNSAFE_VIEW(t, size)  # a miss: the stock way, remembered
                lean = UNSAFE_VIEW(t, size)  # a hit: sim's way
            if not _UNSAFE_VIEWS or describe(stock) != describe(lean) or \
                    storage_key(lean.untyped_storage()) != storage_key(t.untyped_storage()):
                return False
    return True


__all__ = ["UNSAFE_VIEW", "unsafe_view", "unsafe_view_hit", "unsafe_views_agree",
           "unsafe_views_on"]
