"""Sim takes CUDA's dropout: the fused kernel's bool mask, not the CPU's noise in the input dtype."""

import pytest
import torch
from torch import nn

from lab.measure.sim.dispatch.fake_mode import fake_mode
from lab.measure.sim.dispatch.policy import CudaPaths
from lab.measure.tracker import TensorTracker

N = 1 << 20  # elements


def _saved_bytes(train: bool, p: float = 0.1, sim: bool = True) -> int:
    """Bytes still live after a dropout forward whose output is kept (the saved tensors)."""
    with fake_mode(), CudaPaths() if sim else _Nothing():
        x = torch.randn(N, requires_grad=True)
        h = x * 2  # a non-leaf, as a model's activations are; made before tracking
        drop = nn.Dropout(p).train(train)
        with TensorTracker() as tr:
            y = drop(h)
            live = tr.live_bytes  # what dropout made and keeps: its output and what it saved
        del y
    return live


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_training_dropout_keeps_a_bool_mask_as_on_cuda():
    # output (4 B/element) + the mask autograd saves: 1 B (bool) on CUDA
    assert _saved_bytes(True) == N * 4 + N * 1


def test_without_the_policy_the_cpu_path_keeps_fp32_noise():
    # the CPU composite draws its noise in fp32 and saves it: the difference sim must not make
    assert _saved_bytes(True, sim=False) == N * 4 + N * 4


@pytest.mark.parametrize("train,p", [(False, 0.1), (True, 0.0)])
def test_dropout_that_does_nothing_allocates_nothing(train, p):
    assert _saved_bytes(train, p) == 0  # dropout returns its input


def test_dropout_gradient_flows_through_the_mask():
    with fake_mode(), CudaPaths():
        x = torch.randn(64, requires_grad=True)
        y = nn.functional.dropout(x * 2, 0.5, True)
        assert y.grad_fn.name() == "NativeDropoutBackward0"
        y.sum().backward()
        assert x.grad.shape == x.shape
