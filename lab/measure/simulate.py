"""Simulation: the same experiment code under `FakeTensorMode`.

Fake tensors carry shapes, dtypes and storages of the right size but no data, so a 2 GB
`nn.Linear` or a 1.5B-parameter model "runs" in seconds on a laptop and the tracker counts exact
bytes. What simulation cannot know is named in every result: no timings, no allocator rounding,
no cuBLAS/cuDNN workspaces, and CPU kernels' choice of saved tensors (fake device: cpu).
"""

from __future__ import annotations

from contextlib import contextmanager

from torch._subclasses.fake_tensor import FakeTensorMode

SIM_NOTES = (
    "Simulated with FakeTensorMode (fake device: cpu): bytes are exact numel × itemsize of every "
    "tensor; there is no timing, no allocator rounding (CUDA rounds blocks to 512 B) and no "
    "cuBLAS/cuDNN workspace.",
)


@contextmanager
def fake_mode():
    # allow_non_fake_inputs: module-level constants and tensors made before the mode still work
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        yield mode
