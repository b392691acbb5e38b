"""DDP in the lab: its gradient buckets named, and in sim its comm hook and bucket rebuild.

The buckets are made by DDP's C++ reducer, which the tensor tracker sees as storages born inside
one call; `ddp_buckets` labels them "gradients". In sim (lab.measure.distributed: the fake
process group) the fake all-reduce returns no tensor, so a comm hook does what DDP's default hook
does, and the reducer's one rebuild after the first backward (which reads values) reaches only
the allocator model (`_BucketRelayout`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import torch
import torch.distributed as dist

from .distributed import Ranks
from .torch_compat import ddp_bucket_sizes, rebuild_buckets


@contextmanager
def ddp_buckets(run) -> Iterator[dict[str, int]]:
    """Around `DistributedDataParallel(...)`: the buffers its reducer makes in C++ (one flat
    bucket per ~25 MB of gradients, the whole model's gradient size in all) are labelled
    "gradients"; their bytes land in the yielded dict (`bytes`)."""
    out: dict = {"bytes": 0, "sids": []}
    tr = run.tracker
    start = len(tr.trace.events) if tr is not None else 0
    yield out
    if tr is not None:
        out["bytes"] = tr.label_live_since(start, "gradients")
        out["sids"] = tr.live_born_since(start)  # prepare_ddp's sim rebuild remakes these


def prepare_ddp(run, ddp, ranks: Ranks, buckets: dict | None = None) -> None:
    """After DDP's constructor: in sim, the comm hook and bucket layout of the module docstring;
    in every mode, buckets the reducer rebuilds after the first step (in C++) are labelled
    "gradients" like the first ones. `buckets`: what `ddp_buckets` yielded (sim: the allocator
    model remakes them in the rebuilt layout)."""
    if ranks.simulated:
        n = ranks.world_size

        def allreduce_in_place(state, bucket):  # (no annotations: DDP checks the real ones)
            buf = bucket.buffer()
            buf.div_(n)  # what DDP's default hook does, in place
            dist.all_reduce(buf)  # the fake group: no data moves
            fut = torch.futures.Future()
            fut.set_result(buf)
            return fut

        ddp.register_comm_hook(None, allreduce_in_place)
    relayout = None
    allocator = run.allocator_model
    if ranks.simulated and allocator is not None and buckets and buckets.get("sids"):
        relayout = _BucketRelayout(ddp, allocator, buckets["sids"])
    ddp.reducer = _Reducer(ddp.reducer, run.tracker, rebuild=not ranks.simulated, relayout=relayout)


class _BucketRelayout:
    """Sim's stand-in for the reducer's one rebuild: the memory of it, not the C++ call.

    DDP starts with ONE bucket of the whole model's gradients; at the first forward after a
    backward the reducer rebuilds them in the order gradients became ready, in buckets of
    `first_bucket_bytes_cap` (1 MB) and then `bucket_bytes_cap` (25 MB), freeing the old one
    first. Sim keeps using the old bucket (the same bytes: tracked numbers do not change), and
    the allocator model is told of the new layout, which changes the segments (without it, sim
    reserved 6 % more than the H200 for lesson 22's DDP). The ready order is taken as the
    reverse of the parameters' order, DDP's own first guess."""

    def __init__(self, ddp, allocator, sids: list[int]):
        self.ddp, self.allocator, self.sids, self.calls = ddp, allocator, sids, 0

    def __call__(self) -> None:
        self.calls += 1
        if self.calls != 2:  # the first call comes before any backward: nothing recorded yet
            return
        params = [p for p in self.ddp.module.parameters() if p.requires_grad][::-1]
        indices = ddp_bucket_sizes(self.ddp, params)
        sizes = [sum(params[i].numel() * params[i].element_size() for i in bucket)
                 for bucket in indices]
        self.allocator.relayout(self.sids, sizes)


class _Reducer:
    """DDP's C++ reducer, seen from DDP's Python side: everything passes through, except that
    `_rebuild_buckets` labels the new buckets (or, in sim, keeps the old ones and tells the
    allocator model of the new layout)."""

    def __init__(self, reducer, tracker, rebuild: bool, relayout=None):
        object.__setattr__(self, "_inner", reducer)
        object.__setattr__(self, "_tracker", tracker)
        object.__setattr__(self, "_rebuild", rebuild)
        object.__setattr__(self, "_relayout", relayout)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value) -> None:
        setattr(self._inner, name, value)

    def _rebuild_buckets(self) -> bool:
        if not self._rebuild:
            if self._relayout is not None:
                self._relayout()
            return False
        tr = self._tracker
        start = len(tr.trace.events) if tr is not None else 0
        rebuilt = rebuild_buckets(self._inner)
        if rebuilt and tr is not None:
            tr.label_live_since(start, "gradients")
        return rebuilt
