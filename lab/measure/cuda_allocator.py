"""The real CUDA caching allocator, read and steered: its own record (memory history), its
counters, its run-time settings, a release before a second attempt; and NVML's whole-GPU
readings. (lab.measure.backends.cuda is the cuda mode's backend, which uses these.)

The private APIs these reach (`_record_memory_history`, `_snapshot`, the allocator's run-time
settings, cuBLAS's workspaces) are feature-detected in lab.measure.torch_compat.
"""

from __future__ import annotations

import gc

import torch

from . import torch_compat
from .counters import AllocatorCounters
from .snapshot_format import ACTIVE_ALLOCATED

DEFAULT_MAX_ENTRIES = 200_000


def memory_stats(device: int | torch.device = 0) -> AllocatorCounters:
    return AllocatorCounters.from_memory_stats(torch.cuda.memory_stats(device))


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
            if block["state"] == ACTIVE_ALLOCATED:
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
    torch_compat.clear_cublas_workspaces()
    torch.cuda.empty_cache()


def set_allocator_settings(settings: str) -> bool:
    """e.g. "expandable_segments:True" at run time; False when this torch cannot."""
    return torch_compat.set_allocator_settings(settings)


class MemoryRecorder:
    """Start/stop the allocator's history and take its snapshot."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = max_entries
        self.active = False

    def start(self) -> None:
        torch_compat.record_memory_history(self.max_entries)
        self.active = True

    def snapshot(self) -> dict:
        return torch_compat.memory_snapshot()

    def stop(self) -> None:
        if self.active:
            torch_compat.stop_memory_history()
            self.active = False
