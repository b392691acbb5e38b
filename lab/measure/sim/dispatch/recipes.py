"""A cache hit's answer from its recipe: how to make a key's outputs, kept after its first hit.

The tracker's direct answers (lab.measure.sim.dispatch.fake_mode.cached_answer) build
FakeTensorMode's key items themselves (`direct_key_items`: the header `_cache_key` puts first,
then the arguments the fast way) and keep, per key, how to make the hit's outputs from its entry
(`recipe`): which outputs are constants, which are inputs (in-place ops), which are new tensors
of which metadata, on whose storage. A second hit of the key then skips `_cache_key` (its state
object, the proxy-mode lookup, the key object's hash and compare) and the entry's checks. A
recipe is what the entry says, and an entry never changes for its key (a cleared cache makes the
same entry again). `direct_key_agrees` checks the header against `_cache_key` on sample ops
before the recipes are used.
"""

from __future__ import annotations

from typing import Callable

import torch

from ...torch_compat import CacheKeyState, FakeTensor, FakeTensorMode, OpOverload, SingletonConstant
from ...tracker import NO_ANSWER
from .fast_key import direct_key_items
from .lean_output import leanable, leaned, on_samples

RECIPES: dict[tuple, tuple] = {}  # key items -> (is the output a tuple, its outputs' steps)
_CONSTANT, _INPUT, _NEW = "constant", "input", "new"
DIRECT_KEY_AGREES: list[bool] = []  # direct_key_agrees()'s answer, once asked


def recipe(func, entry):
    """(is_output_tuple, steps) for a valid cache entry whose outputs `answer` can make, as
    FakeTensorMode._get_output_tensor_from_cache_entry reads them; None otherwise."""
    view = isinstance(func, OpOverload) and func.is_view
    steps = []
    for info in entry.output_infos:
        if info.inplace_idx is None and info.metadata is None and info.view_idx is None:
            if info.constant_value is SingletonConstant:
                return None
            steps.append((_CONSTANT, info.constant_value, None))
        elif info.inplace_idx is not None:
            steps.append((_INPUT, info.inplace_idx, None))
        elif info.metadata is not None and leanable(info.metadata):
            steps.append((_NEW, info.metadata, info.view_idx if view else None))
        else:
            return None
    return entry.is_output_tuple, tuple(steps)


def answer(mode, recipe, args):
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
            out = leaned(mode, what, view_arg)
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


def direct_key_agrees(make_mode: Callable) -> bool:
    """Are `direct_key_items` the items of FakeTensorMode's own `_cache_key` for sample ops
    (this torch), on a mode `make_mode()` makes? Checked once per process; until then, and if
    not, no recipe is used."""
    if DIRECT_KEY_AGREES:
        return DIRECT_KEY_AGREES[0]
    DIRECT_KEY_AGREES.append(False)  # while checking (its modes ask too), and if it fails

    def check() -> bool:
        mode = make_mode()
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
                    stock = mode._cache_key(CacheKeyState(None), func, args, kwargs)
                    mine = direct_key_items(mode, func, args, kwargs)
                    if mine != stock.key or [type(a) for a in mine] != [type(b) for b in stock.key]:
                        return False
        return True

    DIRECT_KEY_AGREES[0] = on_samples(check)
    return DIRECT_KEY_AGREES[0]


__all__ = ["DIRECT_KEY_AGREES", "RECIPES", "answer", "direct_key_agrees", "recipe"]
