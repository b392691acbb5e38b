"""What we run on: the CUDA GPU if there is one, else the CPU; and sizes like "16GiB".

A *virtual GPU* is a capacity smaller than the real one, so lessons can show a real
out-of-memory: on CUDA through `torch.cuda.set_per_process_memory_fraction` (the real allocator
raises), in cpu/sim through the tensor tracker (it raises with a message shaped like PyTorch's).
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.report.units import SIZE_HELP, format_bytes, parse_size  # noqa: F401  (re-exported)

from .modes import choose

# torch is imported inside the functions that need it: the mode rule (lab.measure.modes) and the
# CLI's argument checks stay fast; only the GPU probe pays for the import.


@dataclass(frozen=True)
class GpuInfo:
    name: str
    total_bytes: int
    free_bytes: int
    index: int = 0


def no_nvidia_driver() -> bool:
    """True when this machine certainly has no NVIDIA driver: no nvidia-smi and no device node.
    Then the answer needs no `import torch` (seconds on a laptop, for a CLI that only asks)."""
    import os
    import shutil

    return shutil.which("nvidia-smi") is None and not os.path.exists("/dev/nvidiactl")


def cuda_available() -> bool:
    if no_nvidia_driver():
        return False
    import torch

    try:
        return torch.cuda.is_available()
    except Exception:  # a broken driver install should read as "no GPU", not crash
        return False


def gpu_info(index: int = 0) -> GpuInfo | None:
    if not cuda_available():
        return None
    import torch

    free, total = torch.cuda.mem_get_info(index)
    return GpuInfo(torch.cuda.get_device_name(index), total, free, index)


def set_virtual_gpu(capacity: int, index: int = 0) -> float:
    """Cap this process's CUDA allocator at `capacity` bytes; returns the fraction used."""
    import torch

    total = torch.cuda.get_device_properties(index).total_memory
    fraction = min(1.0, capacity / total)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    return fraction


def resolve_mode(mode: str, scale: str | None = None) -> str:
    """The mode `mode` resolves to here (lab.measure.modes.choose is the rule; this probes)."""
    if mode != "auto":
        return mode
    return choose(mode, scale, gpu=cuda_available()).mode
