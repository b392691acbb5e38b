"""`SimFakeTensorMode`: sim's FakeTensorMode, through its dispatch cache the fast way.

The stock FakeTensorMode, its cache and its decisions, with three steps of a hit taken in less
time where a check once per process says they give the same answer on this torch:

- the cache's key built without TensorMetadata dataclasses (lab.measure.sim.dispatch.fast_key);
- a hit's output tensor made in line (lab.measure.sim.dispatch.lean_output), and
  aten._unsafe_view, which the stock cache never holds, from a table of sim's own
  (lab.measure.sim.dispatch.unsafe_view);
- an op straight to the cache, without the call counter, the debug log under no_dispatch() and
  torch._disable_dynamo's wrapper.

And the tracker's direct answers: a tracked sim op goes tracker -> dispatcher -> FakeTensorMode;
the tracker's `func(*args)` makes the dispatcher parse the arguments again, find the next mode,
pop it, build args/kwargs again and call it. When that next mode can only be sim's fake mode
(it is the one mode left on the stack) and the op is a plain hit of its dispatch cache,
`cached_answer` (the hook sim's policy gives the tracker: lab.measure.tracker.TrackerPolicy's
`answer`) answers directly: the same key (`_cache_key` of the same arguments: the dispatcher
hands the fake mode the args/kwargs it handed the tracker), the same entry, the same output,
made from the key's recipe after its first hit (lab.measure.sim.dispatch.recipes).

Every torch name this reaches is a shim of lab.measure.torch_compat; the private methods it
overrides are listed there (CHECKED).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import torch

from ...torch_compat import (FAKE_MODE_KEY, BypassDispatchCache, CacheKeyState, DispatchCacheKey,
                             DispatchCacheValidEntry, FakeTensor, FakeTensorMode,
                             disable_torch_function_subclass, dispatch_handled_apart,
                             dispatch_stack_depth, fake_tensor_log, get_dispatch_mode, no_dispatch)
from ...tracker import NO_ANSWER
from .fast_key import StockKey, direct_key_items, fast_key, fast_key_agrees
from .lean_output import inference_views_agree, lean_output, lean_output_agrees
from .recipes import DIRECT_KEY_AGREES, RECIPES, answer, direct_key_agrees, recipe
from .unsafe_view import UNSAFE_VIEW, unsafe_view, unsafe_view_hit, unsafe_views_agree, \
    unsafe_views_on

_LOCAL_SCALAR = torch.ops.aten._local_scalar_dense.default


class SimFakeTensorMode(FakeTensorMode):
    """FakeTensorMode with the dispatch cache's key built the fast way where it agrees, and a
    cache hit's output tensor made the lean way where that agrees (module docstring)."""

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
        self.lean_output = self.fast_key and lean_output_agrees(sample_mode)
        if self.lean_output:
            inference_views_agree(sample_mode)
            unsafe_views_agree(sample_mode)
            direct_key_agrees(sample_mode)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # FakeTensorMode.__torch_dispatch__ and .dispatch straight to the cache, less what they
        # do besides for sim's ops: a call counter (debug statistics) and a debug log line under
        # no_dispatch(), which cost ~5 % of a sim run; ops those handle themselves, and debug
        # logging, take the stock way
        if self.fast_key and self._cache_on() and not dispatch_handled_apart(func):
            if get_dispatch_mode(FAKE_MODE_KEY) is not None:
                raise AssertionError(f"FakeTensorMode should not be set when dispatching {func}")
            return self._cached_dispatch_impl(func, types, args, kwargs or {})
        return FakeTensorMode.__torch_dispatch__(self, func, types, args, kwargs or {})

    def cached_answer(self, func, args, kwargs):
        """What `func(*args, **kwargs)` would get from this mode's dispatch cache, made the lean
        way, without the trip through the dispatcher; NO_ANSWER where the op must go the normal
        way (a miss, a bypass, `.item()` of a constant, an output the lean way does not make).
        The key is FakeTensorMode's own: its items, built the fast way where `fast_key` covers
        the arguments, find the entry's recipe (`RECIPES`); else `_cache_key` finds the entry.
        Only for the module's `cached_answer` (this mode alone on the stack: nothing traces)."""
        if not self.lean_output or self.cache_crosscheck_enabled or not self._cache_on():
            return NO_ANSWER
        items = direct_key_items(self, func, args, kwargs) \
            if DIRECT_KEY_AGREES and DIRECT_KEY_AGREES[0] else None
        known = RECIPES.get(items) if items is not None else None
        if known is None:
            return self._first_answer(func, args, kwargs, items)
        return answer(self, known, args)

    def _first_answer(self, func, args, kwargs, items):
        """`cached_answer` for a key without a recipe yet: FakeTensorMode's own key and entry;
        the recipe is kept when the key's items were built the fast way (`items`)."""
        if func is _LOCAL_SCALAR or dispatch_handled_apart(func):
            return NO_ANSWER
        if items is not None:  # `_cache_key`'s own items (direct_key_agrees): not built again
            key = DispatchCacheKey(items)
        else:
            try:
                key = self._cache_key(CacheKeyState(self.shape_env), func, args, kwargs or {})
            except BypassDispatchCache:
                return NO_ANSWER
        if func is UNSAFE_VIEW:  # not in the cache: in sim's table, a hit only
            out = unsafe_view_hit(self, key, args, kwargs)
            return NO_ANSWER if out is None else out
        entry = FakeTensorMode.cache.get(key)
        if type(entry) is not DispatchCacheValidEntry:
            return NO_ANSWER  # a miss or a bypass: the normal way records or counts it
        made = recipe(func, entry)
        if made is None:
            return NO_ANSWER
        if items is not None:
            RECIPES[items] = made
        return answer(self, made, args)

    def _cache_on(self) -> bool:
        """Does FakeTensorMode.dispatch use its cache, with nothing to log? (`dispatch_handled_
        apart` names the ops it answers otherwise.)"""
        return self.cache_enabled and not fake_tensor_log.isEnabledFor(logging.DEBUG)

    def _get_output_tensor_from_cache_entry(self, state, entry, key, func, args):
        if self.lean_output:
            out = lean_output(self, entry, func, args)
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
        if func is UNSAFE_VIEW and self.lean_output and unsafe_views_on():
            out = unsafe_view(self, func, types, args, kwargs)
            if out is not None:
                return out
        return super()._cached_dispatch_impl(func, types, args, kwargs)

    def _prep_args_for_hash(self, result, args, state, id_hashed_objects):
        if self.fast_key:
            start = len(result)
            try:
                return fast_key(result, args, self)
            except StockKey:
                del result[start:]
        return super()._prep_args_for_hash(result, args, state, id_hashed_objects)


def sample_mode() -> SimFakeTensorMode:
    """The mode the once-per-process checks run their samples on."""
    return SimFakeTensorMode(allow_non_fake_inputs=True)


def cached_answer(func, args, kwargs):
    """For a mode's __torch_dispatch__ about to call `func(*args, **kwargs)`: the answer sim's
    fake mode would give from its cache when it is the only mode left to reach, else NO_ANSWER
    (the tracker's `answer` hook in sim: lab.measure.sim.dispatch.policy.CudaPaths)."""
    mode = get_dispatch_mode(FAKE_MODE_KEY)
    if type(mode) is not SimFakeTensorMode or dispatch_stack_depth() != 1:
        return NO_ANSWER
    # with subclasses' __torch_function__ off: otherwise each read of a fake tensor's metadata
    # (stride(), is_conj(), untyped_storage(), ...) first looks FakeTensor's up (Tensor's own,
    # which answers the same): ~0.3 us a read, ~20 reads an op; the key items are the same
    with disable_torch_function_subclass():
        return mode.cached_answer(func, args, kwargs)


@contextmanager
def fake_mode() -> Iterator[SimFakeTensorMode]:
    """FakeTensorMode alone (sim's runs, and tests and tools that only need shapes), the fast
    way (SimFakeTensorMode: the same tensors, in less time)."""
    # allow_non_fake_inputs: module-level constants and tensors made before the mode still work
    with SimFakeTensorMode(allow_non_fake_inputs=True) as mode:
        yield mode


__all__ = ["SimFakeTensorMode", "cached_answer", "fake_mode", "sample_mode"]
