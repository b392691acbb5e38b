"""The CUDA side: the caching allocator's own record, counters and NVML.

Private PyTorch APIs live here and only here, feature-detected so torch 2.4–2.14 all work:
`torch.cuda.memory._record_memory_history` changed signature in 2.1 (`enabled="all"`,
`stacks=...`, `max_entries=...`); older builds took `trace_alloc_max_entries`. We ask for Python
stacks only: C++ stacks make `_snapshot()` slow (torchtitan's profiler says the same).
"""

from __future__ import annotations

import gc
import inspect
from typing import Any, NamedTuple

import torch

DEFAULT_MAX_ENTRIES = 200_000


class MemoryStats(NamedTuple):
    allocated: int
    peak_allocated: int
    reserved: int
    peak_reserved: int
    num_alloc_retries: int
    num_ooms: int


def memory_stats(device: int | torch.device = 0) -> MemoryStats:
    s = torch.cuda.memory_stats(device)
    return MemoryStats(
        allocated=s.get("allocated_bytes.all.current", 0),
        peak_allocated=s.get("allocated_bytes.all.peak", 0),
        reserved=s.get("reserved_bytes.all.current", 0),
        peak_reserved=s.get("reserved_bytes.all.peak", 0),
        num_alloc_retries=s.get("num_alloc_retries", 0),
        num_ooms=s.get("num_ooms", 0),
    )


def stats_dict(device: int | torch.device = 0) -> dict[str, int]:
    return memory_stats(device)._asdict()


def nvml_used_bytes(index: int = 0) -> int | None:
    """What nvidia-smi shows as used on the whole GPU (all processes), or None without NVML.

    `index` is this process's CUDA device: torch maps it through CUDA_VISIBLE_DEVICES (a rank
    of a group sees its own GPU as device 0), which NVML's own indices ignore, so torch's
    wrapper is asked first."""
    try:
        return int(torch.cuda.device_memory_used(index))  # torch >= 2.6 wraps NVML itself
    except Exception:
        pass
    try:
        import pynvml  # from nvidia-ml-py; optional

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return int(pynvml.nvmlDeviceGetMemoryInfo(handle).used)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def nvml_utilization(index: int = 0) -> int | None:
    """GPU busy percentage over the driver's last sample period, or None without NVML."""
    try:
        return int(torch.cuda.utilization(index))
    except Exception:
        return None


def active_blocks(device: int = 0) -> dict[int, int]:
    """address -> block size of every block the allocator has handed out right now.

    Block sizes are what `memory_allocated()` counts: requests rounded up to 512 B, and a block
    cut from a fresh segment keeps the segment's remainder when that is too small to split.
    """
    out = {}
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", device) != device:
            continue
        for block in seg["blocks"]:
            if block["state"] == "active_allocated":
                out[block["address"]] = block["size"]
    return out


def release_for_a_second_attempt() -> None:
    """After a failed attempt in this process, give back what it left, so that the next attempt
    measures what a fresh process would: its garbage (a Lightning Trainer holds reference
    cycles), cuBLAS's workspaces (the next matrix product takes them again, as in a fresh
    process) and the allocator's cached segments. Without this, lesson 21's Lightning variant,
    measured again after the history recorder broke its backward, reserved 4.14 GB on the H200
    where the same run in a fresh process reserves 3.75 GB."""
    gc.collect()
    if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()


def set_allocator_settings(settings: str) -> bool:
    """e.g. "expandable_segments:True" at run time; False when this torch cannot.

    `torch._C._accelerator_setAllocatorSettings` (torch >= 2.9) replaced
    `torch.cuda.memory._set_allocator_settings` (2.1-2.8, deprecated since)."""
    for fn in (getattr(torch._C, "_accelerator_setAllocatorSettings", None),
               getattr(torch.cuda.memory, "_set_allocator_settings", None)):
        if fn is not None:
            try:
                fn(settings)
                return True
            except Exception:
                continue
    return False


class MemoryRecorder:
    """Start/stop the allocator's history and take its snapshot."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = max_entries
        self.active = False

    def start(self) -> None:
        fn = torch.cuda.memory._record_memory_history
        params = inspect.signature(fn).parameters
        if "stacks" in params:  # torch >= 2.1
            kwargs: dict[str, Any] = {"stacks": "python"}
            if "max_entries" in params:
                kwargs["max_entries"] = self.max_entries
            fn(enabled="all", **kwargs)
        else:  # torch 2.0 signature
            fn(True, trace_alloc_max_entries=self.max_entries, trace_alloc_record_context=True)
        self.active = True

    def snapshot(self) -> dict:
        return torch.cuda.memory._snapshot()

    def stop(self) -> None:
        if not self.active:
            return
        fn = torch.cuda.memory._record_memory_history
        if "stacks" in inspect.signature(fn).parameters:
            fn(enabled=None)
        else:
            fn(False)
        self.active = False
