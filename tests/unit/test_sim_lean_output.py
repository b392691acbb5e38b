"""A cache hit's output made the lean way (torch_compat._lean_output) is the stock one.

On a dispatch-cache hit, sim makes the output fake tensor without FakeTensor.__new__'s checks and
the generator context manager (issue 25: ~20 % of a sim run). The tensor must be the one the
stock way makes: the same metadata, dispatch keys, Python attributes, and the same storage as
its input for a view op. These tests compare the two on generated ops, check that what the lean
way does not cover goes the stock way, and that a torch where they differ gets the stock way.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.measure import torch_compat as tc
from lab.measure.tracker import output_tensors


@pytest.fixture(scope="module")
def mode():
    m = tc.SimFakeTensorMode(allow_non_fake_inputs=True)
    assert m.lean_output, "this torch's cache-hit output differs from the lean one: sim is slower"
    return m


OPS = {
    "add": lambda x: x + 1, "t": lambda x: x.t(), "slice": lambda x: x[1:],
    "reshape": lambda x: x.reshape(-1), "expand": lambda x: x.unsqueeze(0).expand(2, *x.shape),
    "mm": lambda x: x @ x.t(), "sum": lambda x: x.sum(0), "chunk": lambda x: x.chunk(2, dim=1),
    "bf16": lambda x: x.to(torch.bfloat16), "max": lambda x: x.max(dim=1),
    "softmax": lambda x: x.softmax(-1), "split": lambda x: x.split(1),
    "unbind": lambda x: x.unbind(0), "narrow": lambda x: x.narrow(1, 0, 1),
}


def described(out, inputs):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return [(tc._describe(o), inputs.get(o.untyped_storage()._cdata)) for o in outs]


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(2, 6), grad=st.booleans(),
       dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float16]),
       op=st.sampled_from(sorted(OPS)))
def test_a_lean_hit_makes_the_stock_hits_tensor(mode, rows, cols, grad, dtype, op):
    # given a cached op (the first call is a miss), when it runs again the stock way and the
    # lean way, then both outputs are alike, down to the storage a view shares with its input
    with mode:
        x = torch.empty(rows, cols, dtype=dtype, requires_grad=grad)
        inputs = {x.untyped_storage()._cdata: "x"}
        fn = OPS[op]
        fn(x)
        mode.lean_output = False
        try:
            stock = described(fn(x), inputs)
        finally:
            mode.lean_output = True
        lean = described(fn(x), inputs)
    assert lean == stock


def test_the_lean_way_makes_new_outputs_and_the_stock_way_the_rest(mode, monkeypatch):
    made = []
    original = tc._lean_output
    monkeypatch.setattr(tc, "_lean_output", lambda *a: (made.append(
        (a[2].__name__, original(*a))) or made[-1][1]))
    with mode:
        x = torch.empty(7, 5)
        x + 3
        made.clear()
        x + 3  # a hit: a new tensor
        x.add_(1)
        x.add_(1)  # an in-place hit: the input itself, the stock way
    assert [(name, out is not None) for name, out in made] == [("add.Tensor", True),
                                                               ("add_.Tensor", False)]


def test_a_torch_whose_hit_differs_gets_the_stock_way(monkeypatch):
    original = tc._lean_output

    def one_attribute_short(mode, entry, func, args):
        out = original(mode, entry, func, args)
        if out is not None:
            del out.__dict__["constant"]
        return out

    monkeypatch.setattr(tc, "_lean_output", one_attribute_short)
    monkeypatch.setattr(tc, "_LEAN_AGREES", [])
    assert not tc.lean_output_agrees()
    assert not tc.SimFakeTensorMode(allow_non_fake_inputs=True).lean_output


def test_the_check_leaves_the_dispatch_cache_as_it_was(monkeypatch):
    monkeypatch.setattr(tc, "_LEAN_AGREES", [])
    before = dict(tc.FakeTensorMode.cache)
    assert tc.lean_output_agrees()
    assert tc.FakeTensorMode.cache == before


@pytest.mark.parametrize("out", [
    torch.empty(2), (torch.empty(1), None, torch.empty(2)), [torch.empty(1), torch.empty(3)],
    (), None, 3, (torch.empty(1), [torch.empty(2), (torch.empty(3),)]),
    ([torch.empty(1)], torch.empty(2)), {"a": torch.empty(1)}, (1, torch.empty(2)),
])
def test_an_ops_output_tensors_are_tree_flattens(out):
    expected = [t for t in tc.tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    got = output_tensors(out)
    assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected))


@pytest.mark.parametrize("value", [0.0, 3.0, 1e-8, -2.5, 7, True, False])
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_item_of_a_constant_is_the_stock_answer(mode, value, dtype):
    # Adam's step counts are constants (torch.tensor(0.0) under the mode): .item() of one
    # skips the stock key and _dispatch_impl, and must answer what they answer
    with mode:
        t = torch.tensor(value, dtype=dtype)
        assert t.constant is not None
        fast = t.item()
    with mode:
        mode.fast_key = False
        try:
            stock = t.item()
        finally:
            mode.fast_key = True
    assert type(fast) is type(stock) and fast == stock


def test_item_of_a_tensor_without_a_value_still_fails(mode):
    with mode:
        t = torch.empty(())
        with pytest.raises(tc.fake_exceptions()[0]):
            t.item()


@settings(max_examples=12, deadline=None)
@given(grad=st.booleans(), inference_base=st.booleans(),
       op=st.sampled_from(["t", "slice", "expand", "view", "transpose"]))
def test_under_inference_mode_views_are_cached_and_the_kernels_tensor(mode, grad, inference_base,
                                                                      op):
    """A decode loop (lesson 16) takes views of the weights under inference_mode: the stock way
    never caches them (its synthesised view is an inference tensor, the kernel's a normal one,
    and the dispatch keys differ). Sim's hit is the kernel's tensor, and the view is cached."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    views = {**OPS, "view": lambda x: x.view(-1), "transpose": lambda x: x.transpose(0, 1)}
    assert tc.inference_views_agree()
    with mode:
        w = torch.empty(4, 6, requires_grad=grad and not inference_base)
    with torch.inference_mode(), mode:
        base = torch.empty(4, 6) if inference_base else w
        inputs = {base.untyped_storage()._cdata: "base"}
        mismatch = FakeTensorMode.cache_info().bypasses.get("dispatch_key_set mismatch", 0)
        miss = described(views[op](base), inputs)  # the kernel's output (or a hit of an earlier run)
        hits = FakeTensorMode.cache_info().hits
        hit = described(views[op](base), inputs)
        assert FakeTensorMode.cache_info().hits > hits  # the second one is a cache hit
        assert FakeTensorMode.cache_info().bypasses.get("dispatch_key_set mismatch", 0) == mismatch
    assert hit == miss
    assert all(where == "base" for _, where in hit)  # on the base's storage, as a view is


def test_a_torch_whose_inference_views_differ_keeps_the_stock_way(monkeypatch):
    monkeypatch.setattr(tc, "_INFERENCE_VIEWS", [])
    monkeypatch.setattr(tc, "_describe", lambda t: object())  # nothing ever looks alike
    assert not tc.inference_views_agree()
    assert tc._INFERENCE_VIEWS == [False]
