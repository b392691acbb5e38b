"""A model's fake parameters converted the way CUDA converts its own (lab.measure.sim.dispatch.
module_apply): in place, the Parameter objects, their grads and tied weights kept, the old
bytes given back to the allocator model."""

from __future__ import annotations

import pytest
import torch

from lab.measure.backends.sim import SimBackend
from lab.measure.torch_compat import FakeTensor

V, D = 1024, 256  # 1 MiB of fp32 per weight: every size a multiple of 512 B


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, D)
        self.conv = torch.nn.Conv2d(D, D, 2, bias=False)  # (256, 256, 2, 2): 1 MiB
        self.head = torch.nn.Linear(D, V, bias=False)
        self.head.weight = self.emb.weight  # one Parameter, as GPT-2's

    def forward(self, ids):
        x = self.emb(ids)  # (B, D)
        x = self.conv(x[:, :, None, None].expand(-1, -1, 2, 2)).flatten(1)
        return self.head(x)


def _trained(model):
    model(torch.zeros(4, dtype=torch.long)).float().sum().backward()
    return model


CONVERSIONS = {
    "channels_last": (lambda m: m.to(memory_format=torch.channels_last), torch.float32),
    "half": (lambda m: m.half(), torch.float16),
    "to-bf16": (lambda m: m.to(torch.bfloat16), torch.bfloat16),
}


@pytest.mark.parametrize("how", list(CONVERSIONS))
def test_a_conversion_keeps_each_parameter_its_grad_and_the_tie(how):
    convert, dtype = CONVERSIONS[how]
    backend = SimBackend()
    with backend.running(), backend.new_tracker():
        # Given a model built in sim (fake parameters), one backward done (fake grads)
        model = _trained(Tied())
        params = {n: p for n, p in model.named_parameters(remove_duplicate=False)}
        grads = {n: p.grad for n, p in params.items()}
        assert all(isinstance(p, FakeTensor) for p in params.values())
        before = backend.allocator.model.stats.allocated
        # When it is converted (stock Module._apply refuses: "Couldn't swap Conv2d.weight")
        convert(model)
        # then every parameter and grad is the same object, of the new dtype (layout)
        now = dict(model.named_parameters(remove_duplicate=False))
        assert all(now[n] is p for n, p in params.items())
        assert model.head.weight is model.emb.weight
        assert all(p.dtype == dtype and p.grad is grads[n] and p.grad.dtype == dtype
                   for n, p in now.items())
        if how == "channels_last":
            assert model.conv.weight.is_contiguous(memory_format=torch.channels_last)
            assert model.conv.weight.grad.is_contiguous(memory_format=torch.channels_last)
        # and the allocator model holds the converted bytes only (the old ones were freed)
        after = backend.allocator.model.stats.allocated
        shrink = dtype.itemsize / 4
        assert after - before == -(1 - shrink) * 2 * 2 * (V * D * 4)  # 2 weights, 2 grads


def test_moving_to_the_device_it_is_on_keeps_the_parameters():
    backend = SimBackend()
    with backend.running(), backend.new_tracker():
        model = Tied()
        w = model.emb.weight
        model.to("cpu")  # Lightning's Trainer moves the model to where it is
        assert model.emb.weight is w and model.head.weight is w


def test_cpu_at_teardown_of_a_cuda_script_gives_host_copies_and_frees_the_gpu(tmp_path):
    backend = SimBackend()
    with backend.running(), backend.new_tracker(), backend.cuda_facade(str(tmp_path)):
        # Given a CUDA script's model on the GPU, trained one step
        model = _trained(Tied().cuda())
        before = backend.allocator.model.stats.allocated
        # When its teardown moves it back to the host (Lightning's does)
        model.cpu()
        # then its parameters and grads are host tensors, the tied pair still one Parameter,
        # and the GPU holds none of the model's bytes
        for p in model.parameters():
            assert not isinstance(p, FakeTensor) and not isinstance(p.grad, FakeTensor)
            assert p.device.type == "cpu" and p.grad.shape == p.shape
        assert model.head.weight is model.emb.weight
        assert before - backend.allocator.model.stats.allocated == 2 * 2 * V * D * 4
