"""`memlab fit`'s prediction: few sim runs, many allocator replays (lab/workloads/fit.py says why).

    res = predict(sim_recorder("gpt2-small", sizes, cfg), capacity, cfg)

A sim run of the training step records what the allocator model receives (lab.measure.sim_record:
`("alloc", key, nbytes)` / `("free", key)` events). For the same program at another batch size
the events are the same, in the same order; only the sizes of the allocations that hold
per-sample data change, most of them affine in the batch (numel is a product of dims, one of
them the batch). So two recorded logs give the log at any other micro-batch m >= 2 on the line
through them (`extrapolate`); micro-batch 1 is recorded for real when asked (size-1 dims take
other paths: e.g. GPT-2 at batch 1 makes 8 allocations fewer). Replaying a log under the cap
(`sim.allocator.replay.replay`) is the allocator's own decision, retry included.

Not every size is affine: CUDA's reduction staging buffer follows the kernel's launch
configuration, whose blocks are clamped by the SM count (lab/measure/sim/kernels/reduce.py), so it
grows with the batch and then stops (gpt2-small: 24 MiB per sample up to 132 MiB at micro-batch
6 and no further; the line through 2 and 3 says 192 MiB at 8). Hence anchors: every real
recording from micro-batch 2 up is one, and the log at m is interpolated between the nearest
anchors below and above m, or extrapolated from the two nearest on one side (`LogProbe`). The
first two are micro-batches 2 and 3, recorded at once on two cores (`record_pair`).

Never over-promise: the search's answer and the first batch past it (the one that does not fit,
"one more reserves") are simulated for real, two at once; they become anchors, and the search
runs again on the corrected line, until the answer and the batch after it are both real runs
(gpt2-small under 16 GiB: 2, 3, 8, 9 for fp32 and 2, 3, 20, 21 for bf16 + ckpt, where every
batch was simulated before). After ROUNDS such rounds, or when two anchors are not the same
program (other events: `extrapolate` gives None), every batch is simulated and replayed. Other
batches the search asked about may rest on the line (a fragmentation hole below the answer,
say); the note says so whenever a real run was not what the line had given.

Many GPUs (`--gpus N` with ddp/zero1/fsdp): the recording is rank 0 of N simulated ranks
(lab.measure.distributed's fake process group, `world_size` in the params), so the batch and
the cap are per GPU. The fake group's collectives move no data but their outputs are allocated
like any op's, DDP's bucket and FSDP's shards are sized by the parameters, not the batch: the
log is the same program at every batch as far as that goes (qwen2-1.5b on 8 ranks: the log at
micro-batch 5 extrapolated from 2 and 3 is the recorded one, event for event, for all three).
A long reduction can still take the staging buffer only from some batch on (qwen2-1.5b, fsdp on
2 ranks, seed sizes: 282 allocations more at micro-batch 12 than at 3): another program, so every
batch is simulated.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Any, Callable

from .config import TrainConfig
from .fit import FitResult, Probe, search

BASE = (2, 3)  # the first two anchors: the micro-batches whose logs give the first line
ROUNDS = 4  # searches on a corrected line before every batch is simulated instead


def extrapolate(log_a: list[tuple], a: int, log_b: list[tuple], b: int, m: int) -> list[tuple] | None:
    """The log at micro-batch m on the line through the logs at a and b (interpolated when m
    lies between them); None when they are not the same program (other events, other order)
    or the line gives a negative size. A size that is affine in the batch comes out exact; one
    that is not (between anchors further apart than 1) is rounded to the nearest byte: a guess,
    which the search's answer never rests on alone (`predict`)."""
    if len(log_a) != len(log_b):
        return None
    out = []
    for ea, eb in zip(log_a, log_b):
        if ea[0] != eb[0] or ea[1:2] != eb[1:2]:
            return None
        if ea[0] == "alloc":
            step, rest = divmod((m - a) * (eb[2] - ea[2]), b - a)
            size = ea[2] + step + (2 * rest >= b - a)
            if size < 0 or ea[3:] != eb[3:]:  # [3:]: the stream, when not the default
                return None
            out.append(("alloc", ea[1], size, *ea[3:]))
        elif ea != eb:
            return None
        else:
            out.append(ea)
    return out


class LogProbe:
    """A ProbeFn on recorded sim logs: replays the recorded or interpolated log under the cap.

    `record(global_batch)` runs sim once (lab.measure.sim_record.SimRecord-like: status, log,
    error). Micro-batches come from the search as global batches (micro × accum). Every real
    recording from micro-batch 2 up is an anchor of the line: the log at m comes from the
    nearest anchors (`guess`)."""

    def __init__(self, record: Callable[[int], Any], capacity: int, accum: int = 1):
        self.record, self.capacity, self.accum = record, capacity, accum
        self.recs: dict[int, Any] = {}  # micro-batch -> SimRecord (real sim runs)
        self.extrapolating = True
        self.no_line: tuple[int, int] | None = None  # anchors that made no line: all real since
        self.off_line: list[int] = []  # recorded where the line between earlier anchors was wrong
        self.replays = 0
        self._probes: dict[int, tuple[Any, Probe]] = {}  # m -> (what its log came from, Probe)

    @property
    def sim_runs(self) -> int:
        return len(self.recs)

    @property
    def anchors(self) -> list[int]:
        return sorted(k for k, r in self.recs.items() if k >= BASE[0] and r.status == "ok")

    def real(self, m: int):
        if m not in self.recs:
            self.recs[m] = self.record(m * self.accum)
        return self.recs[m]

    def _between(self, m: int) -> tuple[int, int]:
        """The anchors that give m: the nearest below and above, else the two nearest on the
        one side that has two."""
        ks = self.anchors
        below, above = [k for k in ks if k < m], [k for k in ks if k > m]
        if below and above:
            return below[-1], above[0]
        return tuple(below[-2:]) if len(below) >= 2 else tuple(above[:2])

    def guess(self, m: int) -> list[tuple] | None:
        """The log at m on the line between the nearest anchors; None when they are not the
        same program."""
        a, b = self._between(m)
        return extrapolate(self.recs[a].log, a, self.recs[b].log, b, m)

    def _base(self) -> Any:
        """Record BASE (two at once) if not yet; the failed record, if one failed."""
        todo = [k for k in BASE if k not in self.recs]
        if todo:
            self.recs.update(zip(todo, record_pair(self.record, [k * self.accum for k in todo])))
        return next((self.recs[k] for k in BASE if self.recs[k].status != "ok"), None)

    def _source(self, m: int) -> Any:
        """What the log at m comes from: "real", a failed record, or the anchors (a, b)."""
        if m in self.recs or not self.extrapolating or m < BASE[0]:
            return "real"
        bad = self._base()
        return bad if bad is not None else self._between(m)

    def log(self, m: int) -> tuple[list[tuple] | None, Any]:
        """(log, the failed record or None): recorded, or on the line between anchors."""
        src = self._source(m)
        if src == "real":
            rec = self.real(m)
            return (rec.log, None) if rec.status == "ok" else (None, rec)
        if not isinstance(src, tuple):
            return None, src
        log = self.guess(m)
        if log is None:  # batch-dependent program: every batch is simulated
            self.extrapolating, self.no_line = False, src
            return self.log(m)
        return log, None

    def __call__(self, batch: int) -> Probe:
        from lab.measure.sim.allocator.replay import replay

        m = batch // self.accum
        src = self._source(m)
        if m in self._probes and self._probes[m][0] == src:  # the same log as last time
            return self._probes[m][1]
        log, failed = self.log(m)
        if failed is not None:
            return Probe(batch, failed.status, 0, failed.error)
        capped = replay(log, cap=self.capacity)
        free = replay(log) if capped.oom is not None or capped.num_alloc_retries else capped
        self.replays += 1 + (free is not capped)
        status = "oom" if capped.oom is not None else "ok"
        p = Probe(batch, status, capped.peak_allocated, None, capped.peak_reserved,
                  need_bytes=free.peak_reserved, need_allocated=free.peak_allocated)
        self._probes[m] = (self._source(m), p)
        return p

    def anchor(self, ms: list[int]) -> None:
        """Simulate micro-batches ms for real (two at once where two are new): anchors from now
        on. Each whose log is not the one the earlier anchors gave is kept in `off_line`."""
        new = [m for m in ms if m not in self.recs]
        if not new:
            return
        line = self.extrapolating and self._base() is None
        guesses = {m: self.guess(m) for m in new if line and m >= BASE[0]}
        recs = (record_pair(self.record, [m * self.accum for m in new]) if len(new) == 2
                else [self.record(m * self.accum) for m in new])
        for m, rec in zip(new, recs):
            self.recs[m] = rec
            if m in guesses and (rec.status != "ok" or rec.log != guesses[m]):
                self.off_line.append(m)


def record_pair(record: Callable[[int], Any], batches: list[int],
                timeout_s: float = 600.0) -> list[Any]:
    """Record two batches at once on two cores: the first in a forked child of this (warm)
    process, the second here; one after the other where fork is not available (Windows) or
    not safe (CUDA initialised here, or other threads that could hold a lock in the child). A
    child that fails or hangs past `timeout_s` is killed and its batch recorded here."""
    import os
    import pickle
    import select
    import signal
    import threading

    if (len(batches) != 2 or not hasattr(os, "fork") or _cuda_initialised()
            or threading.active_count() > 1):
        return [record(b) for b in batches]
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: record, send, leave without running the parent's exit handlers
        code = 0
        try:
            os.close(rd)
            data = pickle.dumps(record(batches[0]))
            with os.fdopen(wr, "wb") as f:
                f.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(wr)
    mine = record(batches[1])
    chunks, deadline = [], time.monotonic() + timeout_s
    with os.fdopen(rd, "rb", buffering=0) as f:
        while True:
            ready, _, _ = select.select([f], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:  # hung: give up on the child
                os.kill(pid, signal.SIGKILL)
                chunks = []
                break
            chunk = f.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    data = b"".join(chunks)
    theirs = pickle.loads(data) if status == 0 and data else record(batches[0])
    return [theirs, mine]


def _cuda_initialised() -> bool:
    import sys

    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def predict(record: Callable[[int], Any], capacity: int, cfg: TrainConfig,
            max_micro: int = 1 << 16, label: str | None = None) -> FitResult:
    """The largest batch under `capacity` by the allocator model (module docstring): search on
    the line; simulate the answer and the batch after it for real (anchors from then on) and
    search again, until both are real recordings; after ROUNDS such rounds, or when two
    recordings are not the same program, every batch is simulated."""
    with _frozen_heap():
        return _predict(record, capacity, cfg, max_micro, label)


@contextmanager
def _frozen_heap():
    """What this process holds when a prediction starts (torch, transformers, the lab: some
    400,000 objects) kept out of the garbage collector's full passes while the sim runs make
    and drop theirs: each full pass would walk it all (~0.2 s of a core), here and in the
    children `record_pair` forks, which also copy fewer pages (gc.freeze is what Python's docs
    advise before a fork). Thawed after: an in-process caller collects as before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _predict(record, capacity: int, cfg: TrainConfig, max_micro: int, label: str | None
             ) -> FitResult:
    t0 = time.perf_counter()
    probe = LogProbe(record, capacity, cfg.micro_batches)
    rounds, why_real = 0, None
    while True:
        line = probe.extrapolating
        res = search(probe, capacity, cfg, max_micro, label)
        if line and not probe.extrapolating:  # two recordings of different programs
            why_real = ("the logs at micro-batches {} and {} make no line (other allocations, "
                        "or a size it would make negative)".format(*probe.no_line))
            continue  # the same search on real runs (those already recorded are kept)
        if not probe.extrapolating or res.status != "ok":
            break  # none-fits and errors come from real runs (micro-batches 1 and 2)
        todo = [k for k in (res.micro_batch, res.micro_batch + 1)
                if k <= max_micro and k not in probe.recs]
        if not todo:  # the answer and the first batch past it were simulated for real
            break
        if rounds == ROUNDS:
            probe.extrapolating = False
            why_real = ("the allocations did not follow the line between micro-batches "
                        + _listed(probe.recs))
            continue
        probe.anchor(todo)
        rounds += 1
    if why_real:
        res.notes.append(why_real + "; every batch was simulated")
    elif probe.off_line and res.status == "ok":
        res.notes.append("not every allocation is affine in the batch: simulated for real at "
                         f"micro-batches {_listed(probe.recs)}, the rest on the line between "
                         "these")
    # what sim cannot know at this many ranks (lab.measure.distributed.extrapolation_note)
    for rec in probe.recs.values():
        res.notes += [n for n in getattr(rec, "notes", ()) if "extrapolation" in n
                      and n not in res.notes]
    res.sim_runs, res.simulated_micro_batches = probe.sim_runs, sorted(probe.recs)
    res.seconds = round(time.perf_counter() - t0, 2)
    return res


def _listed(ms) -> str:
    return ", ".join(map(str, sorted(ms)))


def sim_recorder(workload: str, sizes: dict[str, Any], cfg: TrainConfig,
                 gpus: int = 1) -> Callable[[int], Any]:
    """record(global batch) -> SimRecord: the workload's training step in sim, in this process
    (FakeTensorMode allocates nothing, so no worker is needed for isolation); ddp/zero1/fsdp on
    `gpus` simulated ranks (lab.measure.distributed: rank 0 recorded, so the batch is per GPU)."""

    def record(batch: int):
        from lab.measure.sim_record import record_sim

        from . import experiment

        params = {**sizes, "batch": batch, "workload": workload, "config": cfg.to_dict(),
                  **({"world_size": gpus} if cfg.parallel != "none" else {})}
        return record_sim(experiment.combo, params)

    return record


__all__ = ["BASE", "LogProbe", "ROUNDS", "extrapolate", "predict", "record_pair", "sim_recorder"]
