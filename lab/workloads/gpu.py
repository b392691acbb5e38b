"""CUDA-only helpers the lessons use: GPU busy time.

Everything here is a no-op (returns None) off CUDA, so lesson code stays device-agnostic. The
allocator's counters and settings are the session's (`run.memory_counters()`,
`run.set_allocator_settings()`), which answer in sim too.
"""

from __future__ import annotations

import threading

import torch


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
        from lab.measure.cuda_allocator import nvml_utilization

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
