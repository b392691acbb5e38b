"""`SimBackend`: the experiment under FakeTensorMode, taking CUDA's code paths, on a GPU that is a
row of data (lab.measure.sim.gpus), with a model of the caching allocator listening.

Fake tensors carry shapes, dtypes and storages of the right size but no data, so a 2 GB
`nn.Linear` or a 1.5B-parameter model "runs" in seconds on a laptop and the tracker counts exact
bytes. The fake device is the CPU (fake CUDA tensors crash the process in SDPA's device guard);
`CudaPaths` (lab.measure.sim.dispatch.policy) makes the ops take CUDA's paths where the CPU's
differ, and the allocator model (lab.measure.sim.allocator.replay.Replay), a storage observer of
the tracker, places every allocation in segments as it happens: predicted max_memory_allocated /
max_memory_reserved, and out-of-memory where the GPU would under the same cap. This module puts
the simulator (lab.measure.sim) together behind the `Backend` interface; the simulator never
imports it.

While a run executes, code that calls the CUDA allocator's API directly (Lightning's Trainer
calls `torch.cuda.empty_cache()`, lesson 17 changes settings at run time) reaches the model:
`ALLOCATOR_API`, a table of patches installed and restored as one unit.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, ContextManager

import torch

from .. import torch_compat
from ..result import AllocatorStats, DeviceInfo, RunResult
from ..result_parts import series_timelines
from ..sim.allocator.replay import Replay
from ..sim.allocator.settings import AllocatorSettingsError, settings_from_env
from ..sim.dispatch.fake_mode import fake_mode
from ..sim.dispatch.module_apply import fake_aware_apply
from ..sim.dispatch.policy import CudaPaths
from ..sim.facade.memory_api import memory_api_patches
from ..sim.gpus import H200, Gpu
from ..sim.kernels.streams import SimStreams
from ..sim.patches import Patch, Patches
from ..sim.ranks import simulated_ranks
from ..sim.versions import version_notes
from ..trace import PhaseRecord
from ..tracker import TensorTracker
from .base import Backend

if TYPE_CHECKING:
    from ..distributed import Ranks

SIM_NOTES = (
    "Simulated with FakeTensorMode, taking CUDA's paths (CUDA autocast's op lists and weight "
    "cache, the attention kernel CUDA picks, the optimizer implementation CUDA defaults to, "
    "cuBLAS workspaces); tensor bytes are exact "
    "numel x itemsize; allocated/reserved are predicted by a model of PyTorch's caching allocator "
    "(512 B rounding, segments, caching); there is no timing.",
)


def new_allocator(cap: int | None, gpu: Gpu = H200) -> Replay:
    """The allocator model of a run on `gpu` capped at `cap` (None: the whole card).

    The real allocator reads PYTORCH_ALLOC_CONF (else PYTORCH_CUDA_ALLOC_CONF) when CUDA starts;
    the model reads it here, when the run's backend is built: a variant's env (lessons 17 and 23)
    is set by then, and a warm worker needs no cold start for it (lab.runner.worker). A setting the
    allocator would refuse fails the run's first allocation with a one-line
    AllocatorSettingsError, as CUDA's first allocation would (lab.measure.sim.allocator.settings).
    """
    try:
        settings, refused = settings_from_env(os.environ), None
    except AllocatorSettingsError as e:
        settings, refused = None, e
    allocator = Replay(cap=cap, series=True, total=gpu.total_bytes, settings=settings)
    allocator.refused = refused
    allocator.current_stream = SelectedStream()
    return allocator


class SelectedStream:
    """The stream device-agnostic code selected, as a number (0: the default stream).

    Sim runs on CPU fake tensors, so code written for any device (FSDP2's all-gather and
    reduce-scatter streams) selects `torch.cpu` streams: `with device_handle.stream(s)` sets
    torch.cpu's current stream, which CUDA code would have set on the GPU. Each stream object
    gets a number for as long as the run lives (the dict keeps the object, hashed by identity)."""

    def __init__(self):
        self._numbers = {torch_compat.cpu_default_stream(): 0}

    def __call__(self) -> int:
        return self.number(torch_compat.cpu_current_stream())

    def number(self, stream) -> int:
        """`stream`'s number (a torch.cpu stream object; the default one is 0)."""
        return self._numbers.setdefault(stream, len(self._numbers))


def allocator_api(backend: SimBackend) -> list[Patch]:
    """The patches a sim run executes under (the checked-in list: tests/unit/test_sim_backend.py
    checks that each is restored)."""
    def empty_cache() -> None:
        backend.empty_cache()

    def set_allocator_settings(settings: str) -> None:
        backend.set_allocator_settings(settings)

    streams = backend.streams

    def record_stream(tensor, stream) -> None:
        streams.record_stream(tensor, stream)

    def synchronize(device=None) -> None:
        streams.synchronize()

    rows = [
        Patch(torch.cuda, "empty_cache", lambda _: empty_cache,
              "torch.cuda.empty_cache() reaches the allocator model"),
        Patch(torch.cuda.memory, "empty_cache", lambda _: empty_cache,
              "the same function, by its module"),
    ]
    rows += [Patch(owner, name, lambda _: set_allocator_settings,
                   "allocator settings changed at run time reach the model")
             for owner, name in torch_compat.allocator_settings_targets()]
    # streams, as device-agnostic code reaches them (torch.get_device_module(device) is torch.cpu
    # in sim): the model's stream uses and synchronisation points (lab.measure.sim.kernels.streams)
    rows += [
        Patch(torch.Tensor, "record_stream", lambda _: record_stream,
              "Tensor.record_stream reaches the allocator model (a freed block waits)"),
        Patch(torch.cpu, "Stream", streams.stream_class,
              "torch.cpu streams that synchronize and record events: the model's sync points"),
        Patch(torch.cpu, "synchronize", lambda _: synchronize,
              "a synchronize of every stream: waiting blocks come back"),
    ]
    # memory_stats / memory_snapshot / mem_get_info / set_per_process_memory_fraction (lesson 23)
    rows += memory_api_patches(backend.allocator)
    # whether cuDNN's benchmark empties the cache after each search: CUDA-only bindings, which a
    # CPU build lacks (a script that calls them would fail in sim); sim's cuDNN model reads it
    convolutions = backend.policy.convolutions

    def set_conv_benchmark_empty_cache(enable: bool) -> None:
        convolutions.empty_cache_after_search = bool(enable)

    owner, setter, getter = torch_compat.conv_benchmark_empty_cache_targets()
    rows += [
        Patch(owner, setter, lambda _: set_conv_benchmark_empty_cache,
              "a script's switch of cuDNN's emptying after a search reaches sim's model", add=True),
        Patch(owner, getter, lambda _: lambda: convolutions.empty_cache_after_search,
              "and reads it back", add=True),
    ]
    # model.half() / .to(memory_format=...) / .cpu() of fake parameters: converted in place, as
    # CUDA converts its own (stock _apply swaps fake parameters, which their weak references
    # forbid); a module moved to the device it is on keeps its parameters (Lightning's Trainer)
    rows.append(Patch(torch.nn.Module, "_apply", fake_aware_apply,
                      "fake parameters are converted in place, as CUDA's are"))
    return rows


class SimBackend(Backend):
    name = "sim"

    def __init__(self, gpu_memory: int | None = None, *, gpu: Gpu | None = None,
                 tracked: bool = True, allocator: Replay | None = None):
        """`tracked`: the CUDA run this stands for has memlab's tracker on (the lessons'
        recordings); False: a plain run (`memlab fit`), whose ATen takes real tensors' in-place
        branches (lab.measure.sim.dispatch.policy). `allocator`: a model made by the caller (fit's
        recording one), else one for `gpu` (a row of lab.measure.sim.gpus, default the H200)
        capped at `gpu_memory`."""
        super().__init__(gpu_memory)
        self.gpu = gpu = gpu or H200
        self.allocator = allocator if allocator is not None else new_allocator(gpu_memory, gpu)
        self.policy = CudaPaths(tracked=tracked, gpu=gpu)
        self.streams = SimStreams(self.allocator)  # the tracker's keys, once it is made

    def device_info(self) -> DeviceInfo:
        return DeviceInfo("simulated (FakeTensorMode)", "sim", self.gpu_memory, self.gpu_memory)

    def new_tracker(self) -> TensorTracker:
        tracker = TensorTracker(policy=self.policy, observers=[self.allocator])
        self.allocator.clock = lambda: len(tracker.trace.events)  # the timelines' x: event index
        self.streams.key_of = tracker.sid_of
        return tracker

    def running(self) -> ContextManager[Any]:
        stack = ExitStack()
        stack.enter_context(fake_mode())
        stack.enter_context(self.policy)
        stack.enter_context(Patches(allocator_api(self)))
        return stack

    def collect_garbage(self) -> None:
        """Fake tensors hold no memory; a full collection costs ~0.5 s here."""

    def snapshot(self, trace, to_file: bool, at_oom: bool = False) -> dict | None:
        """The tracker's trace as a memory_viz snapshot; a run that ran out of memory ends it
        with the `oom` entry the GPU's allocator would write, and records the model's state at
        that request (allocated, reserved, the cap) as the GPU's out-of-memory observer does
        (`memlab view` explains it and replays it under other settings)."""
        snap = super().snapshot(trace, to_file, at_oom)
        oom = self.allocator.result.oom
        if snap is None or not at_oom or oom is None:
            return snap
        m = self.allocator.model
        entries = snap["device_traces"][0]
        t_us = entries[-1]["time_us"] if entries else 0
        entries.append({"action": "oom", "size": oom.request, "stream": oom.stream,
                        "device_free": m.total - oom.reserved, "time_us": t_us, "frames": []})
        snap["memlab"]["oom"] = {
            "device": 0, "segment": oom.requested, "device_total": m.total, "cap": m.cap,
            "device_free": m.total - oom.reserved, "allocated": oom.allocated,
            "reserved": oom.reserved,
            "taken": "by memlab's sim: the allocator model's state at the failing request"}
        return snap

    def finish(self, result: RunResult, phases: list[PhaseRecord], snapshot: dict | None) -> None:
        result.notes.extend(SIM_NOTES)
        result.notes.extend(version_notes(set(result.versions)))  # what the run used
        result.notes.extend(f"not modelled: {what}" for what in sorted(self.policy.unmodelled))
        convolutions = self.policy.convolutions.note(self.gpu.name, self.gpu.capability == (9, 0))
        if convolutions:
            result.notes.append(convolutions)
        if not self.gpu.validated:
            result.notes.append(f"GPU {self.gpu.name}: its row of data (SMs, workspaces, memory) "
                                "is unvalidated; sim was validated on the H200 and the H100.")
        if self.streams.recorded:
            result.notes.append(
                f"record_stream ({self.streams.recorded:,} calls): a block freed while another "
                "stream still used it is kept from reuse until that stream's next "
                "synchronisation, the most a GPU can lag, so the reserved memory here is an upper "
                "bound; a GPU whose copies keep up reserves less (lesson 12, overlapped-offload, "
                "measures how much)")
        r = self.allocator.finish()
        a = result.allocator = AllocatorStats.from_counters(r, predicted=True)
        a.untracked_peak_bytes = r.peak_allocated - result.peak.bytes
        a.timeline, a.reserved_timeline = series_timelines(r.allocated_series, r.reserved_series)

    # ---- the caching allocator's API: the model ----------------------------------------------------
    def empty_cache(self) -> bool:
        self.allocator.empty_cache()
        return True

    def set_allocator_settings(self, settings: str) -> bool:
        """PYTORCH_CUDA_ALLOC_CONF-style "key:value,..." (lab.measure.sim.allocator.settings; a
        refused one raises AllocatorSettingsError, one line)."""
        self.allocator.set_settings(settings)
        return True

    def memory_counters(self) -> dict[str, int] | None:
        stats = self.allocator.model.stats
        return {"allocated": stats.allocated, "reserved": stats.reserved}

    @property
    def pinned_host(self):
        """The model of the pinned host allocator (lab.measure.sim.kernels.offload.PinnedHostModel)
        that offloading counts in and `torch.cuda.host_memory_stats()` answers from."""
        return self.policy.offload.host

    @property
    def allocator_model(self) -> Replay:
        return self.allocator

    def stand_in_values(self) -> ContextManager[None]:
        return self.policy.stand_in_values()

    def real_values(self) -> ContextManager[None]:
        return torch_compat.unset_fake_temporarily()

    def simulated_ranks(self, run, world_size: int, device_type: str) -> ContextManager[Ranks]:
        """Every rank in this process: the fake process group (lab.measure.sim.ranks)."""
        return simulated_ranks(run, world_size, device_type, self.pinned_host)

    # ---- someone else's CUDA script (memlab profile --mode sim) ----------------------------------
    def cuda_facade(self, script_dir: str | None = None):
        """The CUDA facade (lab.measure.sim.facade.cuda_facade) over this run's allocator model and
        CUDA paths, on this backend's card: a script's `cuda` tensors, `torch.cuda` calls and
        memory counters land here. Without a --gpu-memory cap the model has the whole card: its
        memory minus the CUDA context (lab.measure.sim.gpus says why)."""
        from ..sim.facade.cuda_facade import CudaFacade

        model = self.allocator.model
        if model.cap is None:
            model.device_free = self.gpu.limit_bytes
            model.total = self.gpu.total_bytes
        return CudaFacade(self.allocator, self.gpu, policy=self.policy, script_dir=script_dir,
                          streams=self.streams)


__all__ = ["SIM_NOTES", "SelectedStream", "SimBackend", "allocator_api", "new_allocator"]
