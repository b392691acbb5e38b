"""What we run on: the CUDA GPU if there is one, else the CPU; and sizes like "16GiB".

A *virtual GPU* is a capacity smaller than the real one, so lessons can show a real
out-of-memory: on CUDA through `torch.cuda.set_per_process_memory_fraction` (the real allocator
raises), in cpu/sim through the tensor tracker (it raises with a message shaped like PyTorch's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 10**3, "m": 10**6, "g": 10**9,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
SIZE_HELP = "a size such as 16GiB, 8GB, 512MiB or 1000000 (bytes)"


def parse_size(text: str) -> int:
    """'16GiB' -> 17179869184. Raises ValueError naming what is accepted."""
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"{text!r} is not {SIZE_HELP}")
    value = float(m.group(1)) * _UNITS[unit]
    if value <= 0:
        raise ValueError(f"{text!r} must be more than 0 bytes")
    return int(value)


def format_bytes(n: int | float | None, unit: str = "auto") -> str:
    """Display only. GB = 10**9 (the seeds' unit); GiB = 2**30 (what nvidia-smi and PyTorch print)."""
    if n is None:
        return "—"
    if unit == "GB":
        return f"{n / 1e9:.2f} GB"
    if unit == "GiB":
        return f"{n / 2**30:.2f} GiB"
    a = abs(n)
    for div, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if a >= div:
            return f"{n / div:.2f} {name}"
    return f"{int(n)} B"


@dataclass(frozen=True)
class GpuInfo:
    name: str
    total_bytes: int
    free_bytes: int
    index: int = 0


def cuda_available() -> bool:
    try:
        return torch.cuda.is_available()
    except Exception:  # a broken driver install should read as "no GPU", not crash
        return False


def gpu_info(index: int = 0) -> GpuInfo | None:
    if not cuda_available():
        return None
    free, total = torch.cuda.mem_get_info(index)
    return GpuInfo(torch.cuda.get_device_name(index), total, free, index)


def set_virtual_gpu(capacity: int, index: int = 0) -> float:
    """Cap this process's CUDA allocator at `capacity` bytes; returns the fraction used."""
    total = torch.cuda.get_device_properties(index).total_memory
    fraction = min(1.0, capacity / total)
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    return fraction


def resolve_mode(mode: str, scale: str) -> str:
    """`auto`: cuda when a GPU is present, else cpu for small scale and sim for seed scale."""
    if mode != "auto":
        return mode
    if cuda_available():
        return "cuda"
    return "cpu" if scale == "small" else "sim"
