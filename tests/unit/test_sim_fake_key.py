"""Sim's fast dispatch-cache key (lab.measure.sim.dispatch.fast_key) is FakeTensorMode's own key.

FakeTensorMode caches an op's output under a key of its arguments; sim builds that key without
the TensorMetadata dataclass (issue 25: ~40 % of a sim run). The key must be the stock one item
for item, or the cache would hand out another op's output: these tests compare the two on
generated tensors and argument lists, check that what the fast way does not cover goes the stock
way, and that a torch whose key differs gets the stock key.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._subclasses._fake_tensor_utils import _CacheKeyState
from torch._subclasses.fake_tensor import _BypassDispatchCache

from lab.measure import torch_compat as tc
from lab.measure.sim.dispatch import fast_key as fk
from lab.measure.sim.dispatch.fake_mode import SimFakeTensorMode


def keys(mode, args):
    """(the fast key, the stock key) of `args`: lists of items, or the bypass each raised."""
    out = []
    for fn in (SimFakeTensorMode._prep_args_for_hash, tc.FakeTensorMode._prep_args_for_hash):
        items: list = []
        try:
            fn(mode, items, args, _CacheKeyState(None), [])
        except _BypassDispatchCache as e:
            items = ["bypass", e.reason]
        out.append((items, [type(i) for i in items]))
    return out


@pytest.fixture(scope="module")
def mode():
    m = SimFakeTensorMode(allow_non_fake_inputs=True)
    assert m.fast_key, "this torch's FakeTensorMode key differs from the fast one: sim is slower"
    return m


DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool, torch.complex64]


@st.composite
def fake_tensors(draw):
    shape = draw(st.lists(st.integers(0, 5), min_size=0, max_size=5))
    t = torch.empty(shape, dtype=draw(st.sampled_from(DTYPES)))
    how = draw(st.sampled_from(["plain", "t", "slice", "expand", "channels_last", "conj",
                                "grad", "permute"]))
    if how == "t" and t.dim() >= 2:
        t = t.transpose(0, 1)
    elif how == "slice" and t.dim() >= 1 and t.shape[0] > 1:
        t = t[1:]
    elif how == "expand" and t.dim() >= 1:
        t = t.unsqueeze(0).expand(3, *t.shape)
    elif how == "channels_last" and t.dim() == 4:
        t = t.contiguous(memory_format=torch.channels_last)
    elif how == "conj" and t.is_complex():
        t = t.conj()
    elif how == "grad" and t.is_floating_point():
        t = t.requires_grad_()
    elif how == "permute" and t.dim() >= 3:
        t = t.permute(*reversed(range(t.dim())))
    return t


SCALARS = st.one_of(st.integers(-3, 10), st.floats(allow_nan=False), st.booleans(), st.none(),
                    st.sampled_from(["mean", "sum"]), st.sampled_from(DTYPES))


def test_the_fast_key_agrees_on_this_torch():
    assert fk.fast_key_agrees()


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_fast_key_is_the_stock_key_item_for_item(mode, data):
    with mode:
        tensors = data.draw(st.lists(fake_tensors(), min_size=1, max_size=3))
    scalars = data.draw(st.lists(SCALARS, max_size=3))
    args = (*tensors, *scalars, [tensors[0], 1], (2, [3, tensors[-1]]), torch.Size([2, 3]))
    kwargs = {"dim": scalars[:1], "out": tensors[0], "keepdim": True}
    fast, stock = keys(mode, args)
    assert fast == stock
    fast, stock = keys(mode, kwargs)
    assert fast == stock


def test_what_the_fast_key_does_not_cover_goes_the_stock_way(mode):
    with mode:
        x = torch.empty(2, 3)
        const = torch.tensor(1.0)  # a fake tensor with a constant: the stock path bypasses it
    other = tc.FakeTensorMode()
    with other:
        foreign = torch.empty(2)  # another mode's fake
    for args in [(const,), (torch.empty(2),), (foreign,), (x, lambda: 0), (x, slice(0, 2)),
                 (x, torch.Generator())]:
        fast, stock = keys(mode, args)
        assert fast == stock, args


def test_a_torch_whose_key_differs_gets_the_stock_key(monkeypatch):
    original = fk.fast_tensor_key

    def one_field_short(result, t, mode):
        original(result, t, mode)
        result.pop()

    monkeypatch.setattr(fk, "fast_tensor_key", one_field_short)
    monkeypatch.setattr(fk, "_AGREES", [])
    assert not fk.fast_key_agrees()
    assert not SimFakeTensorMode(allow_non_fake_inputs=True).fast_key
