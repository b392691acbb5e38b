"""Backward sums the gradients of a tensor used twice in place, as on real tensors without a
dispatch mode (lab.measure.sim.kernels.grad_accumulate): FakeTensor made the engine take `old +
new`, one gradient-sized allocation per accumulation that a plain CUDA run does not make (gemma-2b
bf16 + ckpt: +4.1 % reserved against the H200's plain loop)."""

from __future__ import annotations

import torch

from lab.measure.sim.allocator.replay import Replay
from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.measure.sim.dispatch.policy import CudaPaths
from lab.measure.tracker import TensorTracker

N = 96  # (N, N) fp32: 36,864 B, a size nothing else here has


def _backward_allocs(create_graph=False, tracked=False):
    """Allocations of h's size made in backward, where h = x @ w is used twice; tracked=False:
    sim stands for a plain run (`memlab fit`)."""
    policy = CudaPaths(tracked=tracked)
    replay = Replay(record=True)
    with fake_mode(), policy, TensorTracker(policy=policy, observers=[replay]):
        x = torch.randn(N, 8, requires_grad=True)
        w = torch.randn(8, N, requires_grad=True)
        h = x @ w
        loss = (h * 2 + h.sin()).sum()
        start = len(replay.log)
        loss.backward(create_graph=create_graph)
    return [e for e in replay.log[start:] if e[0] == "alloc" and e[2] == N * N * 4]


def test_the_engine_adds_the_second_gradient_in_place():
    # backward makes: the sum's expanded grad is a view; mul's grad (grad * 2), sin's grad
    # (grad * cos(h): cos, then the product) -> 3 of h's size; the accumulation adds none
    assert len(_backward_allocs()) == 3


def test_with_create_graph_the_engine_adds_out_of_place_as_on_cuda():
    # grad mode on in backward: InputBuffer::accumulate's first branch, `old_var + var`
    assert len(_backward_allocs(create_graph=True)) == len(_backward_allocs()) + 1


def test_under_memlabs_tracker_the_engine_adds_out_of_place_as_on_cuda():
    # a TorchDispatchMode counts as a tensor subclass for can_accumulate_inplace (checked on
    # real CPU tensors with torch.profiler: add_ without a mode, add with one)
    assert len(_backward_allocs(tracked=True)) == len(_backward_allocs()) + 1
