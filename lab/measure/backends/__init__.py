"""One backend per way of measuring: `backend_for(mode, ...)` (lab.measure.backends.base says
what a backend answers). The sim backend lives with the simulator (lab.measure.sim.backend)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..modes import mode_info
from .base import Backend

if TYPE_CHECKING:
    from ..sim.gpus import Gpu
    from .cuda import GpuTurnsLike


def backend_for(mode: str, *, gpu_memory: int | None = None, record_history: bool = True,
                turns: GpuTurnsLike | None = None, gpu: Gpu | None = None) -> Backend:
    """The backend of `mode` (cuda | cpu | sim; ModeError for anything else). `turns`: the GPU's
    turns under the runner service (cuda); `gpu`: the card sim stands for (default the H200)."""
    name = mode_info(mode).name
    if name == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(gpu_memory, record_history=record_history, turns=turns)
    if name == "sim":
        from ..sim.backend import SimBackend
        from ..sim.gpus import H200

        return SimBackend(gpu_memory, gpu=gpu or H200)
    from .cpu import CpuBackend

    return CpuBackend(gpu_memory)


__all__ = ["Backend", "backend_for"]
