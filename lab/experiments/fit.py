"""Will it fit? Predict a training step's peak in simulation, and find the largest batch.

Headless (no UI imports): the playground / fit finder and lesson 13 call these before running
anything on a real GPU. Each prediction runs `train()` for two steps (the second one has the
optimizer state) under FakeTensorMode with the tensor tracker, so it allocates nothing and
takes seconds even for the 1.5B layout. With a capacity, the tracker stops the simulation at
the first allocation that would not fit (a virtual out-of-memory), which is also faster.

The prediction counts tensor bytes exactly. A real CUDA run needs a little more: the caching
allocator's 512-byte rounding, the cuBLAS workspace, the CUDA context (outside PyTorch's
counters, several hundred MB) and fragmentation. `headroom` (default 10%) keeps that margin.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .train import TrainConfig, Workload, train


@dataclass(frozen=True)
class Prediction:
    workload: Workload
    peak_bytes: int | None  # the simulated peak; None when it did not fit the capacity
    capacity_bytes: int | None
    status: str  # "ok" | "oom" | "error"
    error: str | None = None
    peak_phase: str = ""

    @property
    def fits(self) -> bool:
        return self.status == "ok"


def predict(work: Workload, capacity_bytes: int | None = None, *, steps: int = 2,
            headroom: float = 0.10) -> Prediction:
    """Simulate `steps` training steps of `work`; fits when peak × (1 + headroom) ≤ capacity."""
    from lab.measure.measure import measure_variant

    def fn(run):
        train(run, work, steps)

    budget = int(capacity_bytes / (1 + headroom)) if capacity_bytes else None
    res = measure_variant(fn, lesson="fit", variant="predict", mode="sim", scale="seed",
                          params={"steps": steps}, gpu_memory=budget, timing=False)
    peak = res.peak.bytes if res.status == "ok" else None
    return Prediction(work, peak, capacity_bytes, res.status, res.error, res.peak.phase)


def largest_batch(work: Workload, capacity_bytes: int, *, max_batch: int = 4096,
                  headroom: float = 0.10, steps: int = 2) -> tuple[int, list[Prediction]]:
    """The largest batch B (a multiple of micro_batches) whose step fits; 0 if none does.

    Memory is (piecewise) linear in B, so two simulations give a line whose crossing with the
    capacity is a good first guess; every answer is then *verified* by simulation and refined by
    bisection, so the result never relies on the line. Returns (B, all predictions made).
    """
    unit = work.config.micro_batches
    tried: list[Prediction] = []

    def ok(mult: int) -> bool:
        p = predict(replace(work, batch=mult * unit), capacity_bytes, steps=steps,
                    headroom=headroom)
        tried.append(p)
        return p.fits

    lo, hi = 0, max_batch // unit + 1  # lo fits (0 = nothing), hi does not
    if not ok(1):
        return 0, tried
    lo = 1
    p1 = tried[-1].peak_bytes
    if hi > 2 and ok(2):
        lo = 2
        slope = tried[-1].peak_bytes - p1
        if slope > 0:
            budget = capacity_bytes / (1 + headroom)
            guess = int(2 + (budget - tried[-1].peak_bytes) // slope)
            guess = max(lo + 1, min(guess, hi - 1))
            if guess > lo:
                if ok(guess):
                    lo = guess
                    if guess + 1 < hi:  # usually settles it: the line is exact per phase
                        if ok(guess + 1):
                            lo = guess + 1
                        else:
                            hi = guess + 1
                else:
                    hi = guess
    elif hi > 2:
        hi = 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo * unit, tried


def default_work(layout: str = "gpt2-124m", batch: int = 8, seq: int = 1024, **config) -> Workload:
    """A workload with TrainConfig fields as keywords: default_work(precision="bf16")."""
    return Workload(layout, batch, seq, TrainConfig(**config))
