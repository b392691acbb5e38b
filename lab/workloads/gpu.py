"""CUDA-only helpers the lessons use: allocator counters, allocator settings, GPU busy time.

Everything here is a no-op (returns None) off CUDA, so lesson code stays device-agnostic.
Private PyTorch APIs are feature-detected: `torch._C._accelerator_setAllocatorSettings`
(torch >= 2.9) replaced `torch.cuda.memory._set_allocator_settings` (2.1-2.8, deprecated since).
"""

from __future__ import annotations

import threading

import torch


def allocator_counters(device) -> dict[str, int] | None:
    """allocated / reserved (PyTorch's caching allocator) and NVML's used bytes (all processes)."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    from lab.measure.cuda import nvml_used_bytes

    out = {"allocated": torch.cuda.memory_allocated(device),
           "reserved": torch.cuda.memory_reserved(device)}
    used = nvml_used_bytes(device.index or 0)
    if used is not None:
        out["nvml_used"] = used
    return out


def set_allocator_settings(settings: str) -> bool:
    """e.g. "expandable_segments:True" at run time; False when this torch cannot."""
    for fn in (getattr(torch._C, "_accelerator_setAllocatorSettings", None),
               getattr(torch.cuda.memory, "_set_allocator_settings", None)):
        if fn is not None:
            try:
                fn(settings)
                return True
            except Exception:
                continue
    return False


class BusySampler:
    """Samples NVML's GPU utilisation (% of time a kernel was running) every `interval` s.

    `with BusySampler(device) as s: ...` then `s.mean` (None off CUDA or without NVML).
    """

    def __init__(self, device, interval: float = 0.05):
        self.device = torch.device(device)
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = None

    def _loop(self):
        from lab.measure.cuda import nvml_utilization

        while not self._stop.wait(self.interval):
            u = nvml_utilization(self.device.index or 0)
            if u is not None:
                self.samples.append(u)

    def __enter__(self):
        if self.device.type == "cuda":
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread:
            self._thread.join()

    @property
    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None
