"""One backend per way of measuring: `backend_for(mode, ...)` (lab.measure.backends.base says
what a backend answers): cuda (the real allocator), cpu (a virtual GPU's capacity) and sim (the
simulator of lab.measure.sim, put together by lab.measure.backends.sim)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..modes import mode_info
from .base import Backend

if TYPE_CHECKING:
    from .cuda import GpuTurnsLike
    from .sim import Gpu


def backend_for(mode: str, *, gpu_memory: int | None = None, record_history: bool = True,
                turns: GpuTurnsLike | None = None, gpu: Gpu | None = None) -> Backend:
    """The backend of `mode` (cuda | cpu | sim; ModeError for anything else). `turns`: the GPU's
    turns under the runner service (cuda); `gpu`: the card sim stands for (default the H200)."""
    name = mode_info(mode).name
    if name == "cuda":
        from .cuda import CudaBackend

        return CudaBackend(gpu_memory, record_history=record_history, turns=turns)
    if name == "sim":
        from .sim import SimBackend

        return SimBackend(gpu_memory, gpu=gpu)
    from .cpu import CpuBackend

    return CpuBackend(gpu_memory)


__all__ = ["Backend", "backend_for"]
