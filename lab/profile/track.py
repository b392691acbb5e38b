"""`memlab.track()`: the lab's tracker around any code, in this process (a notebook cell).

    import memlab
    with memlab.track(model, opt) as t:      # model/opt built before: counted from the start
        for step in range(2):
            loss = model(x).pow(2).mean()
            loss.backward(); opt.step(); opt.zero_grad()
    t.peak.bytes, t.peak.by_category         # the peak and what was live there, by category
    print(t.report())                        # phases, categories, the largest storages live at
                                             # the peak with their file:line
    t.result                                 # the RunResult (the same contract as every run)

Phases are found as `memlab profile` finds them (lab.profile.phases); `memlab.phase("eval")`
names one of your own. On CUDA only CUDA storages are counted (and `max_memory_allocated`
is read beside them); elsewhere every storage is. Nothing is isolated as `memlab profile`'s
worker is: tensors made before `track()` are invisible unless passed in (`track(model, opt)`).
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

import torch

from lab.measure.result_parts import build_blocks, build_peak, build_phases, build_timeline
from lab.measure.result import AllocatorStats, DeviceInfo, RunResult
from lab.measure.tracker import TensorTracker

from .phases import AutoPhases


class Tracked:
    """What `track()` yields; filled in when the block ends."""

    def __init__(self, device_type: str, label: str):
        self.device_type = device_type
        self.label = label
        self.result: RunResult | None = None

    @property
    def peak(self):
        """The peak (`.bytes`, `.phase`, `.by_category`, `.top`); None until the block ends."""
        return self.result.peak if self.result is not None else None

    @property
    def peak_bytes(self) -> int | None:
        return self.result.peak.bytes if self.result is not None else None

    def report(self, top: int = 10) -> str:
        from .text import render

        return render(self.result, top=top) if self.result is not None else "(still tracking)"

    def __repr__(self) -> str:
        if self.result is None:
            return f"<memlab.track {self.label}: still tracking>"
        from lab.report import format_bytes

        p = self.result.peak
        return f"<memlab.track {self.label}: peak {format_bytes(p.bytes)} in {p.phase or '—'}>"


class track:
    """Context manager (see the module docstring). `device`: "cuda" or "cpu" (default: cuda
    when a GPU is present); `objs`: modules and optimizers that already exist."""

    def __init__(self, *objs, device: str | None = None, label: str = "notebook"):
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device not in ("cuda", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
        self.objs, self.device = objs, device
        self.tracked = Tracked(device, label)
        self.tracker = TensorTracker(device_type="cuda" if device == "cuda" else None)
        self.auto = AutoPhases(self.tracker)
        self._t0 = 0.0

    def __enter__(self) -> Tracked:
        self._t0 = time.perf_counter()
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self._existing()
        self.tracker.__enter__()
        self.auto.__enter__()
        return self.tracked

    def _existing(self) -> None:
        """Parameters, gradients and optimizer state made before: live from the start."""
        for obj in self.objs:
            if isinstance(obj, torch.nn.Module):
                self.tracker.register_existing(list(obj.parameters()) + list(obj.buffers()),
                                               "parameters")
                self.tracker.register_existing([p.grad for p in obj.parameters()
                                                if p.grad is not None], "gradients")
            elif isinstance(obj, torch.optim.Optimizer):
                self.tracker.register_existing(
                    [v for st in obj.state.values() for v in st.values()
                     if isinstance(v, torch.Tensor)], "optimizer_state")
            else:
                raise TypeError(f"track() takes modules and optimizers, not {type(obj).__name__}")
        self.tracker.watch(*self.objs)

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self.auto.__exit__(exc_type, exc, tb)
        finally:
            self.tracker.__exit__(exc_type, exc, tb)
        if self.device == "cuda":
            torch.cuda.synchronize()
        trace = self.tracker.close()
        r = RunResult(lesson="track", variant=self.tracked.label, mode=self.device,
                      scale="", device=_device(self.device), torch_version=torch.__version__,
                      created=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        r.phases = build_phases(self.auto.records, trace)
        r.timeline, r.peak, r.blocks = build_timeline(trace), build_peak(trace), build_blocks(trace)
        if exc is not None:
            r.status = "oom" if isinstance(exc, torch.OutOfMemoryError) else "error"
            r.error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        if self.device == "cuda":
            from lab.measure.cuda_allocator import memory_stats

            r.allocator = AllocatorStats.from_counters(memory_stats(torch.cuda.current_device()))
            r.allocator.untracked_peak_bytes = r.allocator.peak_allocated_bytes - r.peak.bytes
        r.wall_s = time.perf_counter() - self._t0
        if not self.objs:
            r.notes.append("tensors made before track() are not counted; pass the model and "
                           "optimizer to count them: memlab.track(model, opt)")
        self.tracked.result = r
        return False  # an exception inside the block still propagates


def _device(kind: str) -> DeviceInfo:
    if kind == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return DeviceInfo(props.name, "cuda", props.total_memory)
    return DeviceInfo("CPU", "cpu")


__all__ = ["Tracked", "track"]
