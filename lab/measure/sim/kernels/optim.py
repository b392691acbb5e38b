"""The optimizer implementation CUDA picks by default, for sim's CPU-device fake parameters.

An optimizer built with `foreach` and `fused` left at None (`torch.optim.AdamW(params)`) asks
`torch.optim.optimizer._default_to_fused_or_foreach` at each step. It answers foreach only when
every parameter's type is in `_foreach_supported_types` (Tensor, Parameter; DTensor once
torch.distributed.tensor is imported) and its device type in
`_get_foreach_kernels_supported_devices()` (cuda, xpu, ...). A CUDA run therefore takes the
foreach implementation, whose `_foreach_*` intermediates are lists as large as all parameters
together (AdamW: 1x the parameters in its update, lesson 03), while sim's parameters are
FakeTensors on the CPU and would get the per-parameter loop, whose temporaries are one
parameter at a time. While installed, both lists also admit what sim's tensors are (the type
FakeTensor, the device cpu: in sim the CPU stands for the GPU), so the default answers as on
CUDA; an explicit `foreach=` / `fused=` is never asked about and stays as given.

Why the two lists and not the function: torch.distributed.optim's functional optimizers
(ZeroRedundancyOptimizer's) are TorchScript classes compiled when first imported, and they
compile torch.optim.adam.adam together with the function its globals name; a Python
replacement is not scriptable. The original function begins with
`if torch.jit.is_scripting() ...: return False, False`, which TorchScript decides at compile
time, so what it reads after that (the two lists) is never compiled, and TorchScript users see
the untouched function.
"""

from __future__ import annotations

from ...torch_compat import FakeTensor, optimizer_foreach_defaults


class CudaOptimDefaults:
    """While installed, default foreach/fused choices are made as for CUDA parameters."""

    def __init__(self):
        self._devices = None  # the original device-list function, while installed
        self._added_type = False
        self._target = None

    @staticmethod
    def available() -> bool:
        """This torch decides through the two names patched here (torch 2.x does)."""
        return optimizer_foreach_defaults() is not None

    def install(self) -> None:
        target = optimizer_foreach_defaults()
        if target is None or self._devices is not None:
            return
        owner, name, types = self._target = target
        original = self._devices = getattr(owner, name)
        # the module's own reference: `from torch.utils._foreach_utils import ...` bound it there
        setattr(owner, name, lambda: [*original(), "cpu"])
        if FakeTensor not in types:
            # in place, as torch.distributed.tensor registers DTensor in this same list
            types.append(FakeTensor)
            self._added_type = True

    def uninstall(self) -> None:
        if self._target is None:
            return
        owner, name, types = self._target
        if self._devices is not None:
            setattr(owner, name, self._devices)
            self._devices = None
        if self._added_type:
            types.remove(FakeTensor)
            self._added_type = False
        self._target = None
