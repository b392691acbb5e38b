"""`memlab fit`'s CUDA confirmation: a probe that runs one batch for real in a fresh worker.

The search itself (sim prediction, the line, the bisection, `confirm`) is the workload layer's
(lab/workloads/fit.py); this probe needs the runner, a layer above it.
"""

from __future__ import annotations

from typing import Any

from lab.runner.protocol import RunRequest
from lab.workloads import EXPERIMENT, VARIANT, TrainConfig
from lab.workloads.fit import Probe, ProbeFn

from .compare import LABEL, run_params, worker_ranks


def runner_probe(runner, workload: str, sizes: dict[str, Any], cfg: TrainConfig, mode: str,
                 scale: str, capacity: int | None, timeout_s: float = 600.0,
                 gpus: int = 1) -> ProbeFn:
    """Probe with a real run in a fresh worker (cuda: capped at `capacity`; ddp/zero1/fsdp on
    `gpus` ranks, one GPU each, every one capped: the fullest decides)."""

    def probe(batch: int) -> Probe:
        req = RunRequest(LABEL, VARIANT, mode, scale, kind="experiment", experiment=EXPERIMENT,
                         params=run_params(workload, {**sizes, "batch": batch}, cfg, gpus),
                         gpu_memory=capacity, timing=False, timeout_s=timeout_s,
                         ranks=worker_ranks(cfg, mode, gpus))
        r = runner.run(req)
        every = r.ranks or [r]
        a = max(every, key=lambda x: x.allocator.peak_allocated_bytes if x.allocator else 0).allocator
        peak = a.peak_allocated_bytes if a else max(x.peak.bytes for x in every)
        return Probe(batch, r.status, peak, r.error, a.peak_reserved_bytes if a else None)

    return probe


__all__ = ["runner_probe"]
