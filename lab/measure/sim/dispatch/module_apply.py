"""`Module._apply` for fake parameters, converted the way CUDA converts its own.

On a GPU, `model.half()`, `model.to(torch.bfloat16)`, `model.to(memory_format=channels_last)`
and a teardown's `model.cpu()` change each parameter in place: CUDA and CPU tensors share one
TensorImpl type, so Module._apply sets `param.data = converted` (and the grad's `.data`). The
Parameter object stays, and with it the optimizer's references, hooks and tied weights (GPT-2's
embedding and head are one Parameter).

Stock Module._apply swaps every FakeTensor parameter with `torch.utils.swap_tensors` instead (it
tests `isinstance(param, FakeTensor)`, not the `__future__` flag), and swap_tensors refuses a
tensor that has a weak reference on it: FakeTensorMode's memo keeps one on each, and so does the
tracker (pytorch#184976; plain torch fails the same way: `with FakeTensorMode():
nn.Conv2d(3, 8, 3).to(memory_format=torch.channels_last)` raises "Couldn't swap Conv2d.weight").

Here a module's fake parameters are converted as CUDA's are; its other parameters and its
buffers go through stock _apply. A conversion whose result is not fake (the host stand-in a
fake tensor's `.cpu()` makes in `memlab profile`) gets a new Parameter, as stock gives one for a
result of another tensor type; the CUDA facade then ties shared parameters again.
"""

from __future__ import annotations

import torch

from ...torch_compat import FakeTensor


def _converted(param, fn):
    """`param` after `fn`, as CUDA's _apply leaves it: the same object where the result is
    fake (a dtype, layout or no-op move), a new Parameter where it is not."""
    with torch.no_grad():
        new = fn(param)
    grad = param.grad
    if new is not param and isinstance(new, FakeTensor):
        param.data = new
        out = param
    elif new is not param:
        param.grad = None
        out = torch.nn.Parameter(new, requires_grad=param.requires_grad)
    else:
        out = param
    if grad is not None:
        with torch.no_grad():
            new_grad = fn(grad)
        if new_grad is grad:
            out.grad = grad
        elif isinstance(new_grad, FakeTensor) and out is param:
            grad.data = new_grad
        else:
            out.grad = new_grad
    return out


def fake_aware_apply(original):
    """A replacement for `torch.nn.Module._apply` (`original`: the one it replaces)."""

    def _apply(module, fn, recurse=True):
        fake = [key for key, p in module._parameters.items() if isinstance(p, FakeTensor)]
        if not fake:
            return original(module, fn, recurse)
        if recurse:
            for child in module.children():
                child._apply(fn)
        params = module._parameters
        kept = {key: params[key] for key in fake}
        converted = {}
        try:
            for key in fake:  # hidden from stock _apply, which skips None
                params[key] = None
            original(module, fn, False)  # the module's other parameters and its buffers
            for key in fake:
                converted[key] = _converted(kept[key], fn)
        finally:
            for key in fake:
                params[key] = converted.get(key, kept[key])
        return module

    return _apply


__all__ = ["fake_aware_apply"]
