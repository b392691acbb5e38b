"""The largest batch that fits a GPU of a given size (`memlab fit`, the app, lesson 18's question).

A batch *fits* when the run does not run out of memory under the cap: on CUDA, the real caching
allocator capped by `set_per_process_memory_fraction` (or the card's free memory) decides; in a
prediction, the allocator model replaying the simulated run decides the same way - a new
segment must fit under the cap after the allocator has released its cached segments and retried.
So the quantity that matters is the peak *reserved* (segments), not the tensors' bytes, and no
ad-hoc headroom is added on top.

1. *Predict* (lab/workloads/fit_sim.py): sim records the allocations of micro-batches 2 and 3;
   allocation sizes are (mostly) affine in the batch, so the log of any micro-batch follows
   from the nearest real recordings, and replaying a log through the allocator model under the
   cap answers fit or not in a fraction of a second. The search below then probes few batches:
   the line through the two (peak reserved is close to affine in the batch) gives a guess, the
   guess and its neighbour are probed, a bisection finishes if needed. The answer and the batch
   after it are then simulated for real and the search runs again with them, until both were
   real runs. With gradient accumulation N the search is over the micro-batch.
2. *Confirm* (cuda): the predicted batch runs for real in a fresh worker with the GPU capped at
   the size asked for; if the real allocator says OOM, one smaller micro-batch at a time is tried.

Probes are injected (`ProbeFn`): tests drive the search with formulas, the CLI with the
allocator-model probe, the confirmation with workers (lab.playground.fit.runner_probe).
Torch-free.
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
    peak_bytes: int = 0  # max allocated (as far as it got, when oom)
    error: str | None = None
    reserved_bytes: int | None = None  # max reserved (the segments the cap counts)
    need_bytes: int | None = None  # max reserved with no cap: what this batch asks for
    need_allocated: int | None = None  # max allocated with no cap (the least it can reserve)


ProbeFn = Callable[[int], Probe]  # global batch -> what a run at that batch measured


@dataclass
class FitResult:
    combo: str
    capacity_bytes: int  # the cap the allocator may reserve up to
    status: str = "ok"  # ok | none-fits | error
    micro_batch: int | None = None  # the largest micro-batch that fits
    batch: int | None = None  # effective batch per optimizer step (micro × accum)
    peak_bytes: int | None = None  # predicted max allocated at that batch
    reserved_bytes: int | None = None  # predicted max reserved at that batch (under the cap)
    margin_bytes: int | None = None  # capacity - predicted max reserved
    next_peak_bytes: int | None = None  # what one micro-batch more would reserve (no cap)
    fixed_bytes: int | None = None  # the line's intercept: what does not grow with the batch
    per_sample_bytes: float | None = None  # its slope, per micro-batch sample
    probes: int = 0  # batches the search asked about
    sim_runs: int = 0  # batches simulated for real (the rest replayed from the line)
    simulated_micro_batches: list[int] = field(default_factory=list)  # those, by micro-batch
    capped: bool = False  # hit the search's upper bound (the peak barely grows with the batch)
    error: str | None = None
    cuda_status: str | None = None  # None: not confirmed (no GPU, or --no-confirm)
    cuda_micro_batch: int | None = None
    cuda_peak_bytes: int | None = None  # allocator peak allocated at cuda_micro_batch
    cuda_reserved_bytes: int | None = None
    cuda_margin_bytes: int | None = None  # capacity - peak reserved (what the device gave)
    seconds: float | None = None  # wall time of the prediction
    notes: list[str] = field(default_factory=list)
    optimizer: dict | None = None  # the OptimizerSpec the combination trains with (optim.py)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _used(p: Probe) -> int:
    return p.reserved_bytes if p.reserved_bytes is not None else p.peak_bytes


def _need(p: Probe) -> int:
    return p.need_bytes if p.need_bytes is not None else _used(p)


def _need_allocated(p: Probe) -> int:
    return p.need_allocated if p.need_allocated is not None else p.peak_bytes


def fits(p: Probe, capacity: int) -> bool:
    return p.status == "ok" and _used(p) <= capacity


def search(probe: ProbeFn, capacity: int, cfg: TrainConfig, max_micro: int = 1 << 16,
           label: str | None = None) -> FitResult:
    """Largest micro-batch m whose run fits (see the module docstring). Starts at m = 2 (the
    line's first point; m = 1 is asked only when 2 does not fit), assuming a smaller batch
    never needs more."""
    res = FitResult(label or cfg.label, capacity, optimizer=optimizer_info(cfg))
    cache: dict[int, Probe] = {}

    def P(m: int) -> Probe:
        if m not in cache:
            cache[m] = probe(m * cfg.micro_batches)
        return cache[m]

    def failed(p: Probe) -> bool:
        if p.status not in ("ok", "oom"):
            res.status, res.error = "error", p.error or p.status
        return res.status == "error"

    first = 2 if max_micro >= 2 else 1
    good, bad = 0, None
    if failed(P(first)):
        return _finish(res, cache, good)
    if fits(P(first), capacity):
        good = first
    else:
        bad = first
        if first == 2 and not failed(P(1)) and fits(P(1), capacity):
            good = 1
    if good == 0:
        res.status = "error" if res.status == "error" else "none-fits"
        if res.status == "none-fits":
            res.notes.append("even a micro-batch of 1 does not fit")
        return _finish(res, cache, good)
    if good == first and first + 1 <= max_micro:
        nxt = P(first + 1)
        if failed(nxt):
            return _finish(res, cache, good)
        if fits(nxt, capacity):
            good = first + 1
        else:
            bad = first + 1
        slope = _need(nxt) - _need(P(first))
        res.per_sample_bytes = slope / cfg.micro_batches
        res.fixed_bytes = _need(P(first)) - first * slope
        if bad is None and slope > 0:  # the line's guess, and the batch after it
            guess = max(good, min(max_micro, first + (capacity - _need(P(first))) // slope))
            for m in (guess, guess + 1):
                if m > good and (bad is None or m < bad) and m <= max_micro:
                    if failed(P(m)):
                        return _finish(res, cache, good)
                    if fits(P(m), capacity):
                        good = m
                    else:
                        bad = m
    good = _bisect(P, failed, capacity, max_micro, res, cache, good, bad)
    return _finish(res, cache, good)


def _bisect(P, failed, capacity, max_micro, res, cache, good, bad) -> int:
    """Close the gap between the largest batch known to fit and the smallest known not to;
    then look past the boundary: fragmentation is not monotonic (llama-3.2-1b, bf16 + ckpt
    under 40 GiB: in the model 12 runs out of memory where 13 fits; the H200 ran 13 and ran out
    at 14), so the batches whose allocated peak alone still fits are asked too, and the largest
    that fits wins."""
    while len(cache) < MAX_PROBES and (bad is None or bad - good > 1):
        if bad is None:
            m = min(max_micro, good * 2)
            if m == good:
                res.capped = True
                res.notes.append(f"still fits at the search's bound ({max_micro}); the peak "
                                 "barely grows with the batch")
                break
        else:
            m = (good + bad) // 2
        if failed(P(m)):
            return good
        if fits(P(m), capacity):
            good = m
        else:
            bad = m
    # past the boundary only when its out-of-memory was not the allocated bytes alone
    m = (bad or max_micro) + 1
    while (bad is not None and _need_allocated(cache[bad]) <= capacity and m <= max_micro
           and len(cache) < 2 * MAX_PROBES):
        if failed(P(m)) or _need_allocated(P(m)) > capacity:
            break
        if fits(P(m), capacity):
            good = m
        m += 1
    below = sorted(k for k in cache if k < good and not fits(cache[k], capacity))
    if below and res.status == "ok":
        res.notes.append(f"not every smaller batch fits: {', '.join(map(str, below))} "
                         "run(s) out of memory (the allocator's segments fall differently)")
    return good


def _finish(res: FitResult, cache: dict[int, Probe], good: int) -> FitResult:
    res.probes = len(cache)
    if res.status != "ok":
        if res.status == "none-fits":
            smallest = cache[min(cache)]
            res.next_peak_bytes = _need(smallest)
        return res
    p = cache[good]
    res.micro_batch, res.batch = good, p.batch
    res.peak_bytes, res.reserved_bytes = p.peak_bytes, _used(p)
    res.margin_bytes = res.capacity_bytes - _used(p)
    if good + 1 in cache:
        res.next_peak_bytes = _need(cache[good + 1])
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
                res.notes.append(f"predicted micro-batch {res.micro_batch}; on CUDA the "
                                 f"largest that ran was {m}")
            return res
        if p.status != "oom" or m == 1:
            res.notes.append(f"CUDA run at micro-batch {m}: {p.status}: {p.error or ''}".strip())
            return res
        m -= 1
    res.notes.append(f"CUDA still out of memory {tries} micro-batches below the prediction")
    return res


__all__ = ["FitResult", "MAX_PROBES", "Probe", "ProbeFn", "confirm", "fits", "search"]
