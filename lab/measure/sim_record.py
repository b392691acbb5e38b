"""One sim run reduced to what `memlab fit` needs: the allocator model's input, as a log.

    rec = record_sim(experiment_fn, params)        # FakeTensorMode + CUDA's paths, no cap
    rec.log                                        # [("alloc", key, nbytes) | ("free", key) ...]
    replay(rec.log, cap=16 * 2**30).oom            # out of memory under that cap? (replay.py)

The run is `measure`'s sim pass without what a result needs (phases, timeline,
categories, a sampler thread): only the tensor tracker feeding a recording allocator model. The
log does not depend on the cap (the allocations are the program's; the cap only decides where
the allocator fails), so one run answers every cap; and for a batch-independent program the
sizes in the logs of two batch sizes give every other batch size (lab.workloads.fit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .backends.sim import SimBackend
from .measure import error_line, warm_up_dispatch_mode
from .session import Session
from .sim.allocator.replay import Replay


@dataclass
class SimRecord:
    status: str  # ok | error (no cap: a sim run cannot run out of memory)
    log: list[tuple] = field(default_factory=list)
    tracked_peak_bytes: int = 0  # the tensors' peak (numel x itemsize), as RunResult.peak.bytes
    peak_allocated_bytes: int = 0  # the allocator model's, uncapped
    peak_reserved_bytes: int = 0
    error: str | None = None
    notes: list[str] = field(default_factory=list)


def record_sim(fn: Callable[[Session], Any], params: dict[str, Any]) -> SimRecord:
    """Run `fn` (an experiment function taking `run`) in sim once, recording the allocations."""
    warm_up_dispatch_mode()
    torch.manual_seed(0)
    # `memlab fit` asks about the user's own training, which runs without memlab's tracker
    backend = SimBackend(tracked=False, allocator=Replay(record=True))
    tracker = backend.new_tracker()
    session = Session(backend, params, tracker)
    rec = SimRecord("ok")
    try:
        with backend.running(), tracker:
            fn(session)
    except Exception as exc:  # the experiment's failure is the probe's answer, never a crash
        rec.status, rec.error = "error", error_line(exc)
    tracker.close()
    r = backend.allocator.finish()
    rec.log = backend.allocator.log or []
    rec.tracked_peak_bytes = tracker.peak_bytes
    rec.peak_allocated_bytes, rec.peak_reserved_bytes = r.peak_allocated, r.peak_reserved
    rec.notes = list(session.notes)
    return rec


__all__ = ["SimRecord", "record_sim"]
