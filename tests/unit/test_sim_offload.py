"""Sim's save_on_cpu and the pinned host allocator model (lab/measure/sim/kernels/offload.py)."""

import pytest
import torch

from lab.measure.sim.kernels.offload import PinnedHostModel, sim_save_on_cpu
from lab.measure.sim.dispatch.fake_mode import fake_mode


def test_pinned_blocks_round_up_to_powers_of_two_and_are_cached():
    h = PinnedHostModel()
    a = h.alloc(3_000)  # -> 4096
    b = h.alloc(5_000_000)  # -> 8 MiB
    assert (a, b) == (4096, 8 << 20) and h.owned == h.active == 4096 + (8 << 20)
    h.release(b)
    assert h.active == 4096 and h.owned == 4096 + (8 << 20)  # cached, still pinned
    assert h.alloc(6_000_000) == 8 << 20 and h.num_host_alloc == 2  # reused: no new block
    h.alloc(9_000_000)  # 16 MiB: a size class of its own
    assert h.stats()["allocated_bytes.current"] == 4096 + (24 << 20) and h.num_host_alloc == 3


@pytest.mark.slow  # the first FakeTensorMode of a process imports torch._dynamo (seconds)
def test_saved_tensors_leave_the_device_and_come_back_in_backward():
    host = PinnedHostModel()
    save_on_cpu = sim_save_on_cpu(host)
    with fake_mode():
        w = torch.randn(256, 256, requires_grad=True)
        x = torch.randn(64, 256)
        with save_on_cpu(pin_memory=True):
            y = (x @ w).relu().sum()  # mm saves x (and w); relu saves its output
        saved = host.active
        assert saved > 0 and host.num_host_alloc >= 2
        y.backward()
        del y
    assert host.active == 0 and host.owned == host.active_peak >= saved  # freed, kept cached
