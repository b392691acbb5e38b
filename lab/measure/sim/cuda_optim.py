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

import torch.optim.optimizer as _optimizer
from torch._subclasses.fake_tensor import FakeTensor


class CudaOptimDefaults:
    """While installed, default foreach/fused choices are made as for CUDA parameters."""

    def __init__(self):
        self._devices = None  # the original device-list function, while installed
        self._added_type = False

    @staticmethod
    def available() -> bool:
        """This torch decides through the two names patched here (torch 2.x does)."""
        return (callable(getattr(_optimizer, "_get_foreach_kernels_supported_devices", None))
                and isinstance(getattr(_optimizer, "_foreach_supported_types", None), list))

    def install(self) -> None:
        if not self.available() or self._devices is not None:
            return
        original = self._devices = _optimizer._get_foreach_kernels_supported_devices
        # the module's own reference: `from torch.utils._foreach_utils import ...` bound it there
        _optimizer._get_foreach_kernels_supported_devices = lambda: [*original(), "cpu"]
        if FakeTensor not in _optimizer._foreach_supported_types:
            # in place, as torch.distributed.tensor registers DTensor in this same list
            _optimizer._foreach_supported_types.append(FakeTensor)
            self._added_type = True

    def uninstall(self) -> None:
        if self._devices is not None:
            _optimizer._get_foreach_kernels_supported_devices = self._devices
            self._devices = None
        if self._added_type:
            _optimizer._foreach_supported_types.remove(FakeTensor)
            self._added_type = False
