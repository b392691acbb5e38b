"""The largest batch that fits a GPU of a given size (`memlab fit`, the app, lesson 18's question).

Predicted by simulation, confirmed on CUDA when there is one:

1. *Predict* (sim): for a fixed sequence length, every activation grows linearly with the batch,
   so the peak is close to affine in it: peak(b) ≈ fixed + b × per_sample. Two probes (b = 1, 2)
   give the line; the prediction and its neighbour are probed, and a bisection finishes the job
   if the line was off (it rarely is: a handful of probes, not a dozen). With gradient
   accumulation N the search is over the micro-batch; the effective batch is N times that.
2. *Confirm* (cuda): the predicted batch runs for real in a fresh worker with the GPU capped at
   the size asked for (`set_per_process_memory_fraction`); if the real allocator (rounding,
   cuBLAS workspace, fragmentation) says OOM, one smaller micro-batch at a time is tried.

Probes are injected (`ProbeFn`), so tests drive the search with a formula, the CLI with real
sim runs in this process (`sim_probe`: FakeTensorMode allocates nothing, so no worker is needed
for isolation), and the confirmation with workers (lab.playground.fit.runner_probe). Torch-free
until a sim probe runs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from .config import TrainConfig
from .optim import optimizer_info

MAX_PROBES = 32


@dataclass
class Probe:
    batch: int  # the global batch that ran (micro × accum)
    status: str  # ok | oom | error | ...
    peak_bytes: int = 0
    error: str | None = None
    reserved_bytes: int | None = None  # cuda: the allocator's peak reserved


ProbeFn = Callable[[int], Probe]  # global batch -> what a run at that batch measured


@dataclass
class FitResult:
    combo: str
    capacity_bytes: int
    status: str = "ok"  # ok | none-fits | error
    micro_batch: int | None = None  # the largest micro-batch that fits
    batch: int | None = None  # effective batch per optimizer step (micro × accum)
    peak_bytes: int | None = None  # predicted peak at that batch (sim)
    margin_bytes: int | None = None  # capacity - predicted peak
    next_peak_bytes: int | None = None  # the peak one micro-batch more would need
    fixed_bytes: int | None = None  # the line's intercept: what does not grow with the batch
    per_sample_bytes: float | None = None  # its slope, per micro-batch sample
    probes: int = 0
    capped: bool = False  # hit the search's upper bound (the peak barely grows with the batch)
    error: str | None = None
    cuda_status: str | None = None  # None: not confirmed (no GPU, or --no-confirm)
    cuda_micro_batch: int | None = None
    cuda_peak_bytes: int | None = None  # allocator peak allocated at cuda_micro_batch
    cuda_reserved_bytes: int | None = None
    cuda_margin_bytes: int | None = None  # capacity - peak reserved (what the device gave)
    notes: list[str] = field(default_factory=list)
    optimizer: dict | None = None  # the OptimizerSpec the combination trains with (optim.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fits(p: Probe, capacity: int) -> bool:
    return p.status == "ok" and p.peak_bytes <= capacity


def search(probe: ProbeFn, capacity: int, cfg: TrainConfig, max_micro: int = 1 << 16,
           label: str | None = None) -> FitResult:
    """Largest micro-batch m with peak(m × accum) <= capacity (see the module docstring)."""
    res = FitResult(label or cfg.label, capacity, optimizer=optimizer_info(cfg))
    cache: dict[int, Probe] = {}

    def P(m: int) -> Probe:
        if m not in cache:
            cache[m] = probe(m * cfg.micro_batches)
        return cache[m]

    p1 = P(1)
    if p1.status not in ("ok", "oom"):
        res.status, res.error, res.probes = "error", p1.error or p1.status, len(cache)
        return res
    if not fits(p1, capacity):
        res.status, res.probes, res.next_peak_bytes = "none-fits", len(cache), p1.peak_bytes
        res.notes.append("even a micro-batch of 1 does not fit")
        return res
    good, bad = 1, None
    p2 = P(2)
    if p2.status == "error":
        res.status, res.error, res.probes = "error", p2.error, len(cache)
        return res
    if fits(p2, capacity):
        good = 2
    else:
        bad = 2
    slope = p2.peak_bytes - p1.peak_bytes if p2.status == "ok" else None
    if slope is not None:
        res.per_sample_bytes = slope / cfg.micro_batches if cfg.micro_batches else slope
        res.fixed_bytes = p1.peak_bytes - slope
    if bad is None and slope and slope > 0:  # the line's prediction, and the batch after it
        guess = max(1, min(max_micro, 1 + (capacity - p1.peak_bytes) // slope))
        for m in (guess, guess + 1):
            if m > good and (bad is None or m < bad) and m <= max_micro:
                if fits(P(m), capacity):
                    good = m
                elif P(m).status == "error":
                    res.status, res.error = "error", P(m).error
                    break
                else:
                    bad = m
    while res.status == "ok" and len(cache) < MAX_PROBES and (bad is None or bad - good > 1):
        if bad is None:
            m = min(max_micro, good * 2)
            if m == good:
                res.capped = True
                res.notes.append(f"still fits at the search's bound ({max_micro}); the peak "
                                 "barely grows with the batch")
                break
        else:
            m = (good + bad) // 2
        p = P(m)
        if p.status == "error":
            res.status, res.error = "error", p.error
            break
        if fits(p, capacity):
            good = m
        else:
            bad = m
    res.probes = len(cache)
    res.micro_batch, res.batch = good, good * cfg.micro_batches
    res.peak_bytes = cache[good].peak_bytes
    res.margin_bytes = capacity - res.peak_bytes
    if good + 1 in cache:
        res.next_peak_bytes = cache[good + 1].peak_bytes
    return res


def confirm(res: FitResult, probe: ProbeFn, cfg: TrainConfig, tries: int = 4) -> FitResult:
    """Run the predicted batch for real; step the micro-batch down while the real allocator OOMs."""
    if res.status != "ok" or not res.micro_batch:
        return res
    m = res.micro_batch
    for _ in range(tries):
        p = probe(m * cfg.micro_batches)
        res.cuda_status = p.status
        if p.status == "ok":
            res.cuda_micro_batch = m
            res.cuda_peak_bytes = p.peak_bytes
            res.cuda_reserved_bytes = p.reserved_bytes
            if p.reserved_bytes is not None:
                res.cuda_margin_bytes = res.capacity_bytes - p.reserved_bytes
            if m != res.micro_batch:
                res.notes.append(f"sim predicted micro-batch {res.micro_batch}; on CUDA the "
                                 f"largest that ran was {m} (allocator rounding, workspaces, "
                                 "fragmentation)")
            return res
        if p.status != "oom" or m == 1:
            res.notes.append(f"CUDA run at micro-batch {m}: {p.status}: {p.error or ''}".strip())
            return res
        m -= 1
    res.notes.append(f"CUDA still out of memory {tries} micro-batches below the prediction")
    return res


# ---- probes ------------------------------------------------------------------------------------
def sim_probe(workload: str, sizes: dict[str, Any], cfg: TrainConfig, scale: str,
              label: str = "playground", gpus: int = 1) -> ProbeFn:
    """Probe by simulation in this process (imports torch and the engine on first use);
    ddp/zero1/fsdp on `gpus` simulated ranks (rank 0 measured: a per-GPU batch)."""

    def probe(batch: int) -> Probe:
        from lab.measure.measure import measure_variant

        from . import experiment

        params = {**sizes, "batch": batch, "workload": workload, "config": cfg.to_dict(),
                  **({"world_size": gpus} if cfg.parallel != "none" else {})}
        r = measure_variant(experiment.combo, lesson=label, variant=cfg.label, mode="sim",
                            scale=scale, params=params, timing=False)
        return Probe(batch, r.status, r.peak.bytes, r.error)

    return probe


__all__ = ["FitResult", "Probe", "ProbeFn", "confirm", "search", "sim_probe"]
