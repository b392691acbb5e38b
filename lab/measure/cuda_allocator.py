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
    """Start/stop the allocator's history and take its snapshot; and, at an out-of-memory, the
    snapshot of that moment.

    The caching allocator calls its out-of-memory observers after it has freed its cache and
    failed, with its lock released, before it raises: a snapshot taken there is the state that
    failed, before the exception unwinds the program's frames and frees their tensors. The
    observer also says what the limit was (the memory fraction's cap, or the whole card), which
    no snapshot records; it goes in the snapshot's `memlab.oom` key (pytorch.org/memory_viz
    ignores keys it does not know). Observers cannot be detached, so one is attached per process
    and serves whichever recorder is active."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = max_entries
        self.active = False
        self.at_oom: dict | None = None  # the snapshot taken at the last out-of-memory

    def start(self) -> None:
        global _recording
        torch_compat.record_memory_history(self.max_entries)
        self.active = True
        self.at_oom = None
        _recording = self
        _attach_oom_observer()

    def snapshot(self, at_oom: bool = False) -> dict:
        """The snapshot now; with `at_oom`, the one taken at the out-of-memory if there was one."""
        if at_oom and self.at_oom is not None:
            return self.at_oom
        return torch_compat.memory_snapshot()

    def stop(self) -> None:
        global _recording
        if self.active:
            torch_compat.stop_memory_history()
            self.active = False
        if _recording is self:
            _recording = None

    def on_oom(self, device: int, segment: int, limit: int, device_free: int) -> None:
        snap = torch_compat.memory_snapshot()
        total = torch.cuda.get_device_properties(device).total_memory
        counters = memory_stats(device)  # the allocator's own, after it freed its cache
        snap["memlab"] = {"oom": {
            "device": device, "segment": segment, "device_free": device_free,
            "device_total": total, "cap": limit if limit < total else None,
            "allocated": counters.allocated, "reserved": counters.reserved,
            "retries": counters.num_alloc_retries,
            "taken": "by memlab's out-of-memory observer, at the failing allocation"}}
        self.at_oom = snap


_recording: MemoryRecorder | None = None
_observer_attached = False


def _attach_oom_observer() -> None:
    global _observer_attached
    if not _observer_attached:
        _observer_attached = torch_compat.attach_oom_observer(_on_oom)


def _on_oom(device: int, segment: int, limit: int, device_free: int) -> None:
    """Runs inside the failing allocation: never raise from here (it would replace the
    out-of-memory error the program is about to see)."""
    rec = _recording
    if rec is None or not rec.active:
        return
    try:
        rec.on_oom(device, segment, limit, device_free)
    except Exception:  # noqa: BLE001 - a snapshot we could not take costs the snapshot only
        rec.at_oom = None
