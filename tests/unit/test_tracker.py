"""The tensor tracker counts every storage exactly on CPU (numel × itemsize)."""

import pytest
import torch
from torch import nn

from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.measure.trace import ALLOC, FREE
from lab.measure.tracker import TensorTracker


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def allocs(tracker):
    return [e for e in tracker.trace.events if e.kind == ALLOC]


def test_linear_weights_input_output_are_numel_times_itemsize():
    tr = TensorTracker()
    with tr:
        tr.phase = "model"
        model = nn.Linear(300, 700)
        tr.phase = "input"
        x = torch.randn(50, 300)
        tr.phase = "forward"
        y = model(x)
    trace = tr.close()
    by_phase = {}
    for e in trace.events:
        if e.kind == ALLOC:
            by_phase[e.phase] = by_phase.get(e.phase, 0) + e.nbytes
    assert by_phase["model"] == nbytes(model.weight) + nbytes(model.bias) == (300 * 700 + 700) * 4
    assert by_phase["input"] == nbytes(x) == 50 * 300 * 4
    assert by_phase["forward"] == nbytes(y) == 50 * 700 * 4
    cats = {trace.category(e.sid) for e in trace.events if e.phase == "model"}
    assert cats == {"parameters"}


def test_mlp_parameters_gradients_and_adam_state_totals():
    torch.manual_seed(0)
    tr = TensorTracker()
    with tr:
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        x, target = torch.randn(32, 64), torch.randint(0, 10, (32,))
        for _ in range(2):
            loss = nn.functional.cross_entropy(model(x), target)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=False)  # keep grads so they are live at the end
    trace = tr.close()
    live = trace.live_at(len(trace.events) - 1)
    totals = trace.by_category(live)
    params = sum(nbytes(p) for p in model.parameters())
    state = sum(nbytes(v) for s in opt.state.values() for v in s.values() if torch.is_tensor(v))
    assert totals["parameters"] == params == (64 * 256 + 256 + 256 * 10 + 10) * 4
    assert totals["gradients"] == params
    # exp_avg + exp_avg_sq per parameter, plus a 4-byte `step` tensor each
    assert totals["optimizer_state"] == state == 2 * params + 4 * len(list(model.parameters()))


def test_views_are_counted_once_and_frees_are_seen():
    tr = TensorTracker()
    with tr:
        x = torch.zeros(1000)
        v = x.view(10, 100)
        s = x[:10]
        t = x.t() if x.dim() == 2 else x.unsqueeze(0)
        assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
        del x, v, s, t
    trace = tr.close()
    assert [(e.kind, e.nbytes) for e in trace.events] == [(ALLOC, 4000), (FREE, 4000)]


def test_resize_and_out_change_the_storage_size():
    tr = TensorTracker()
    with tr:
        buf = torch.empty(0)
        buf.resize_(256)  # grows in place: a new allocation behind the same tensor
        a, b, out = torch.ones(512), torch.ones(512), torch.empty(0)
        torch.add(a, b, out=out)  # out= resizes `out` to 512 floats
    trace = tr.close()
    live = trace.live_at(len(trace.events) - 1)
    assert sorted(e.nbytes for e in live.values()) == [1024, 2048, 2048, 2048]


def test_constants_meta_tensors_and_preexisting_tensors():
    before = torch.ones(100)
    tr = TensorTracker()
    tr.register_existing([before], "inputs")
    with tr:
        const = torch.tensor([1.0, 2.0, 3.0])  # goes through aten.lift_fresh
        meta = torch.empty(10**9, device="meta")  # no memory: not counted
    trace = tr.close()
    sizes = [e.nbytes for e in trace.events if e.kind == ALLOC]
    assert sizes == [400, 12]
    assert trace.category(trace.events[0].sid) == "inputs"
    assert meta.shape[0] == 10**9 and const.numel() == 3


def test_virtual_gpu_raises_a_pytorch_shaped_out_of_memory():
    from lab.measure.backends.cpu import CapacityGuard

    tr = TensorTracker(observers=[CapacityGuard(10_000)])
    with pytest.raises(torch.OutOfMemoryError, match=r"CUDA out of memory\. Tried to allocate"):
        with tr:
            keep = [torch.ones(1000) for _ in range(5)]  # 4 kB each: the third does not fit
    assert tr.live_bytes <= 10_000


def test_simulation_counts_seed_scale_bytes_without_allocating():
    tr = TensorTracker()
    with fake_mode(), tr:
        model = nn.Linear(10_000, 50_000)
        x = torch.randn(5_000, 10_000)
        y = model(x)
    trace = tr.close()
    sizes = sorted(e.nbytes for e in trace.events if e.kind == ALLOC)
    assert sizes == [200_000, 200_000_000, 1_000_000_000, 2_000_000_000]


def test_temporaries_and_activations_are_told_apart():
    tr = TensorTracker()
    with tr:
        model = nn.Linear(100, 100)
        x = torch.randn(8, 100)
        tr.phase = "forward"
        h = torch.relu(model(x))  # the pre-relu output is saved? no: relu saves its output
        tmp = (h * 2).sum()  # (h*2) dies inside the phase
        del tmp
        tr.phase = "after"
    trace = tr.close()
    cats = {}
    for e in trace.events:
        if e.kind == ALLOC and e.phase == "forward":
            cats.setdefault(trace.category(e.sid), []).append(e.nbytes)
    assert 8 * 100 * 4 in cats["activations"]
    assert 8 * 100 * 4 in cats["temporaries"]
