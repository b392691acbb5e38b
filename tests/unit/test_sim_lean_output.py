"""A cache hit's output made the lean way (lab.measure.sim.dispatch.lean_output) is the stock one.

On a dispatch-cache hit, sim makes the output fake tensor without FakeTensor.__new__'s checks and
the generator context manager (issue 25: ~20 % of a sim run). The tensor must be the one the
stock way makes: the same metadata, dispatch keys, Python attributes, and the same storage as
its input for a view op. These tests compare the two on generated ops, check that what the lean
way does not cover goes the stock way, and that a torch where they differ gets the stock way.
"""

from __future__ import annotations

import gc

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.measure import torch_compat as tc
from lab.measure.sim.dispatch import fake_mode as fm
from lab.measure.sim.dispatch import lean_output as lo
from lab.measure.sim.dispatch import recipes as rc
from lab.measure.sim.dispatch import unsafe_view as uv
from lab.measure.sim.dispatch.fake_mode import SimFakeTensorMode
from lab.measure.tracker import NO_ANSWER, output_tensors


class AnswerOnly:
    """A tracker policy that only answers (sim's hook, or none), changing nothing else."""

    rerouted = ()

    def __init__(self, answer):
        self.answer = answer

    def unmade_outputs(self, func, args, kwargs, out) -> tuple:
        return ()

    def after(self, func, args, kwargs, out, sink) -> None:
        pass


@pytest.fixture(scope="module")
def mode():
    m = SimFakeTensorMode(allow_non_fake_inputs=True)
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
    return [(lo.describe(o), inputs.get(o.untyped_storage()._cdata)) for o in outs]


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
    original = fm.lean_output
    monkeypatch.setattr(fm, "lean_output", lambda *a: (made.append(
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
    original = fm.lean_output

    def one_attribute_short(mode, entry, func, args):
        out = original(mode, entry, func, args)
        if out is not None:
            del out.__dict__["constant"]
        return out

    monkeypatch.setattr(fm, "lean_output", one_attribute_short)
    monkeypatch.setattr(lo, "_LEAN_AGREES", [])
    assert not lo.lean_output_agrees(fm.sample_mode)
    assert not SimFakeTensorMode(allow_non_fake_inputs=True).lean_output


def test_the_check_leaves_the_dispatch_cache_as_it_was(monkeypatch):
    monkeypatch.setattr(lo, "_LEAN_AGREES", [])
    before = dict(tc.FakeTensorMode.cache)
    assert lo.lean_output_agrees(fm.sample_mode)
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
    assert lo.inference_views_agree(fm.sample_mode)
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
    monkeypatch.setattr(lo, "INFERENCE_VIEWS", [])
    monkeypatch.setattr(lo, "describe", lambda t: object())  # nothing ever looks alike
    assert not lo.inference_views_agree(fm.sample_mode)
    assert lo.INFERENCE_VIEWS == [False]


UNSAFE_VIEW = torch.ops.aten._unsafe_view.default


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), grad=st.booleans(),
       inference=st.booleans(), sliced=st.booleans())
def test_unsafe_view_is_remembered_and_made_as_a_view_of_its_input(mode, rows, cols, grad,
                                                                   inference, sliced):
    """matmul's last step (every Linear without a bias on a 3-d input): the stock way never
    caches aten._unsafe_view; sim answers the second call from its own table, with the tensor
    the stock way makes, on the input's storage."""
    assert uv.unsafe_views_agree(fm.sample_mode)
    with mode:
        base = torch.empty(rows + 1, 2, cols, requires_grad=grad and not inference)
    with torch.inference_mode(inference), mode:
        x = (base[1:] if sliced else base[:rows]).clone() if inference else base[1:]
        inputs = {x.untyped_storage()._cdata: "x"}
        size = [rows * 2 * cols]
        UNSAFE_VIEW(x, size)  # a miss: the stock way, remembered
        known = len(uv._UNSAFE_VIEWS)
        calls = []
        original = mode._dispatch_impl
        mode._dispatch_impl = lambda *a: calls.append(a[0]) or original(*a)
        try:
            hit = described(UNSAFE_VIEW(x, size), inputs)
            mode.lean_output = False
            try:
                stock = described(UNSAFE_VIEW(x, size), inputs)
            finally:
                mode.lean_output = True
        finally:
            del mode._dispatch_impl
    assert len(uv._UNSAFE_VIEWS) == known
    assert calls == [UNSAFE_VIEW]  # only the stock call took the slow way
    assert hit == stock and hit[0][1] == "x"


def test_a_torch_whose_unsafe_views_differ_keeps_the_stock_way(monkeypatch):
    monkeypatch.setattr(uv, "_UNSAFE_VIEWS_OK", [])
    monkeypatch.setattr(uv, "describe", lambda t: object())  # nothing ever looks alike
    assert not uv.unsafe_views_agree(fm.sample_mode)
    assert uv._UNSAFE_VIEWS_OK == [False]
    with SimFakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(2, 3)
        before = dict(uv._UNSAFE_VIEWS)
        UNSAFE_VIEW(x, [6])
        UNSAFE_VIEW(x, [6])
    assert uv._UNSAFE_VIEWS == before  # the table is not used


@pytest.mark.parametrize("inference", [True, False])
def test_the_tracker_sees_the_same_allocations_with_sims_shortcuts_and_without(inference):
    """A decode step's ops (Linear with and without a bias on a 3-d input, composite ops taken
    apart by the tracker under inference_mode, views) give the tracker the same births and
    deaths whether sim's shortcuts (fast key, lean hits, _unsafe_view's table, the direct
    dispatch) are on or off."""
    import torch.nn.functional as F

    from lab.measure.tracker import TensorTracker

    def trace(shortcuts: bool):
        mode = SimFakeTensorMode(allow_non_fake_inputs=True)
        if not shortcuts:
            mode.fast_key = mode.lean_output = False
        with mode:
            w, b = torch.empty(48, 32), torch.empty(48)
            w2 = torch.empty(32, 48, requires_grad=not inference)
        tracker = TensorTracker(policy=AnswerOnly(fm.cached_answer) if shortcuts else None)
        with torch.inference_mode(inference), mode, tracker:
            x = torch.empty(4, 3, 32)
            for _ in range(3):  # misses, then hits
                h = F.linear(x, w, b).relu()
                y = F.linear(h, w2)
                x = torch.cat([x, y], dim=1)[:, -3:]
                del h, y
        return [(e.kind, e.nbytes) for e in tracker.trace.events]

    assert trace(True) == trace(False)


@pytest.mark.parametrize("inference", [False, True])
def test_the_trackers_direct_cache_answers_are_the_dispatchers(monkeypatch, inference):
    """The tracker takes a plain cache hit from sim's fake mode without the trip through the
    dispatcher (the policy's `answer`: sim's cached_answer), from the key's recipe after its
    first hit. A
    training step (forward, backward, Adam's foreach ops; in-place ops, views, tuple outputs,
    ops with keyword arguments) or a decode step records the same births and deaths, and makes
    the same tensors, as with every op dispatched, and as with FakeTensorMode's own key and
    entry read at every hit (no recipes)."""
    import torch.nn.functional as F

    from lab.measure.tracker import TensorTracker

    answered = []
    original = fm.cached_answer

    def alike(t):  # what describe says, less the mode object (each step has its own)
        return [v for v in lo.describe(t) if not isinstance(v, list)] + [
            (k, v) for k, v in vars(t).items() if k != "fake_mode"]

    def step(direct: bool):
        # the collector off while a step runs: an automatic collection mid-step (when it comes
        # depends on what the process ran before: CI once saw it) frees the step's cycles at
        # another point of one step than of the other, which is not what is compared here
        gc.collect()
        gc.disable()
        try:
            return _step(direct)
        finally:
            gc.enable()

    def _step(direct: bool):
        def asked(*a):
            out = original(*a)
            if out is not NO_ANSWER:
                answered.append(a[0])
            return out

        policy = AnswerOnly(asked if direct else (lambda *a: NO_ANSWER))
        mode = SimFakeTensorMode(allow_non_fake_inputs=True)
        with mode:
            w1 = torch.nn.Parameter(torch.empty(64, 32))
            w2 = torch.nn.Parameter(torch.empty(32, 64))
            opt = torch.optim.Adam([w1, w2])
        tracker = TensorTracker(policy=policy)
        made = []
        with mode, tracker:
            x = torch.empty(4, 5, 32)
            for _ in range(3):  # misses first, then hits
                if inference:
                    with torch.inference_mode():
                        h = F.linear(F.gelu(F.linear(x, w1)), w2)
                        made.append(alike(torch.cat([h, h], dim=1).max(dim=-1)[0]))
                else:
                    h = F.linear(F.gelu(F.linear(x, w1)), w2)
                    loss = F.cross_entropy(h.reshape(-1, 32), torch.zeros(20, dtype=torch.long))
                    loss.backward()
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    made.append(alike(h.detach()[:, 1:].transpose(0, 1)))
        return made, [(e.kind, e.nbytes, e.phase) for e in tracker.trace.events]

    first = []
    first_answer = SimFakeTensorMode._first_answer

    def counted(self, *a):
        out = first_answer(self, *a)
        first.append(out is not NO_ANSWER)  # a hit (its recipe made) or a miss
        return out

    monkeypatch.setattr(SimFakeTensorMode, "_first_answer", counted)
    monkeypatch.setattr(fm, "RECIPES", {})
    dispatched = step(direct=False)
    monkeypatch.setattr(fm, "DIRECT_KEY_AGREES", [False])
    assert step(direct=True) == dispatched  # every hit by FakeTensorMode's key and entry
    assert len(answered) > 20 and sum(first) == len(answered)  # the tracker took answers
    assert not fm.RECIPES
    answered.clear(), first.clear()
    monkeypatch.setattr(fm, "DIRECT_KEY_AGREES", [True])
    assert step(direct=True) == dispatched
    by_recipe = len(answered) - sum(first)  # hits after the key's first: the third step's
    assert fm.RECIPES and by_recipe >= len(answered) / 3


def test_the_direct_key_is_fakes_own_and_a_torch_where_it_differs_gets_no_recipes(monkeypatch):
    """cached_answer's key items (`direct_key_items`) are FakeTensorMode's `_cache_key` items
    on this torch; where a torch puts another item in the key, the check says no and no
    recipe is used."""
    assert rc.direct_key_agrees(fm.sample_mode)
    flag: list = []  # the check's answer, which the mode reads (one list, as in a fresh process)
    monkeypatch.setattr(rc, "DIRECT_KEY_AGREES", flag)
    monkeypatch.setattr(fm, "DIRECT_KEY_AGREES", flag)
    original = rc.direct_key_items
    monkeypatch.setattr(rc, "direct_key_items",
                        lambda *a: (original(*a) or ()) + ("an item torch added",))
    assert not rc.direct_key_agrees(fm.sample_mode)
    monkeypatch.setattr(fm, "RECIPES", {})
    mode = SimFakeTensorMode(allow_non_fake_inputs=True)
    add = torch.ops.aten.add.Tensor
    with mode:
        x = torch.empty(3, 5)
        x + x  # a miss: the entry
        answers = [fm.cached_answer(add, (x, x), {}) for _ in range(3)]
    assert all(a is not NO_ANSWER and a.shape == (3, 5) for a in answers)  # FakeTensorMode's key
    assert not fm.RECIPES
