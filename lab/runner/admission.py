"""A fair queue per GPU, with admission by expected peak; CPU runs admitted by cores.

Pure logic (no processes, no CUDA): the runner service builds one `Admission` for the machine
from the GPUs it sees; tests inject any list of capacities.

- Every GPU run waits in the queue of the GPU(s) it was placed on at arrival: the least loaded
  (bytes running + bytes waiting), so runs spread over all GPUs; a run of N ranks waits in N
  queues, one GPU per rank.
- A run starts when it is first in each of its queues and its expected peak fits beside what
  already runs there, so runs share a GPU only when their peaks fit together. An unknown peak
  is the whole GPU: it runs alone. Strictly first come, first served within a queue (no
  overtaking), so nobody starves.
- Fair between clients: a client's k-th waiting run queues after every other client's (k-1)-th,
  so one `memlab run --all` does not hold a workshop learner behind all of its 48 runs. The
  order is fixed at arrival and the same in every queue, so N-rank runs cannot deadlock.
- sim and untimed runs hold one core; a timed cpu run holds every core (its step time is a
  measurement, as on a GPU); a run of N ranks on cpu holds N cores.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

OnWait = Callable[[str, int], None]


@dataclass(frozen=True)
class Need:
    gpus: int = 0  # distinct GPUs, one per rank; 0: a CPU run
    gpu_bytes: int | None = None  # expected peak per GPU, margin included; None: the whole GPU
    cores: int | None = 1  # CPU runs; None: every core


@dataclass(eq=False)
class Ticket:
    need: Need
    client: str
    key: tuple[int, int]
    queues: list[str] = field(default_factory=list)  # "gpu0", ... or "cpu"
    gpus: list[int] = field(default_factory=list)  # the GPUs it runs on, one per rank
    admitted: bool = False
    withdrawn: bool = False
    held_bytes: list[int] = field(default_factory=list)
    held_cores: int = 0

    def __lt__(self, other: "Ticket") -> bool:  # bisect orders tickets by their key
        return self.key < other.key


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the OS says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class Admission:
    def __init__(self, gpu_bytes: list[int], cores: int):
        self.capacity = list(gpu_bytes)
        self.cores = max(1, cores)
        self.used = [0] * len(self.capacity)
        self.running = [0] * len(self.capacity)
        self.cores_used = 0
        self.cpu_running = 0
        self.queues: dict[str, list[Ticket]] = {f"gpu{g}": [] for g in range(len(self.capacity))}
        self.queues["cpu"] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()

    # ---- arrival ----------------------------------------------------------------------------
    def submit(self, need: Need, client: str = "") -> Ticket:
        """Queue a run. Raises ValueError when it can never run here (more GPUs than there are)."""
        with self._cond:
            waiting = len({id(t) for q in self.queues.values() for t in q if t.client == client})
            t = Ticket(need, client, (waiting, next(self._seq)))
            if need.gpus:
                if need.gpus > len(self.capacity):
                    have = len(self.capacity)
                    raise ValueError(f"the run asks for {need.gpus} GPUs, one per rank; this "
                                     f"machine has {have}" if have else
                                     "the run needs a CUDA GPU and this machine has none")
                t.gpus = sorted(range(len(self.capacity)), key=lambda g: (self._load(g), g))[:need.gpus]
                t.queues = [f"gpu{g}" for g in t.gpus]
            else:
                t.queues = ["cpu"]
            for q in t.queues:
                bisect.insort(self.queues[q], t)
            self._cond.notify_all()
            return t

    def _bytes(self, need: Need, g: int) -> int:
        cap = self.capacity[g]
        return cap if need.gpu_bytes is None else min(need.gpu_bytes, cap)

    def _load(self, g: int) -> int:
        return self.used[g] + sum(self._bytes(t.need, g) for t in self.queues[f"gpu{g}"])

    # ---- waiting ----------------------------------------------------------------------------
    def _fits(self, t: Ticket) -> bool:
        if t.need.gpus:
            return all(self.used[g] + self._bytes(t.need, g) <= self.capacity[g] for g in t.gpus)
        return self.cores_used + self._cores(t.need) <= self.cores

    def _cores(self, need: Need) -> int:
        return self.cores if need.cores is None else min(max(1, need.cores), self.cores)

    def _first_everywhere(self, t: Ticket) -> bool:
        return all(self.queues[q][0] is t for q in t.queues)

    def describe(self, t: Ticket) -> tuple[str, int]:
        """("waiting for GPU 0 — 2 ahead", 2) for a ticket still queued."""
        ahead = max(self.queues[q].index(t) for q in t.queues)
        if t.need.gpus:
            where = ("GPU " if len(t.gpus) == 1 else "GPUs ") + ", ".join(map(str, t.gpus))
            running = max(self.running[g] for g in t.gpus)
        else:
            where = "a CPU core" if self._cores(t.need) == 1 else f"{self._cores(t.need)} CPU cores"
            running = self.cpu_running
        if ahead:
            return f"waiting for {where} — {ahead} ahead", ahead
        return f"waiting for {where} — {running} running, next in line", 0

    def wait(self, t: Ticket, cancel: threading.Event | None = None,
             on_wait: OnWait | None = None, poll_s: float = 0.1) -> bool:
        """Block until `t` may start (True) or `cancel` is set (False; `t` leaves the queue).
        `on_wait(text, ahead)` hears every change of position."""
        said = None
        with self._cond:
            while True:
                if cancel is not None and cancel.is_set():
                    self._withdraw(t)
                    return False
                if self._first_everywhere(t) and self._fits(t):
                    self._admit(t)
                    return True
                text, ahead = self.describe(t)
                if on_wait is not None and text != said:
                    said = text
                    on_wait(text, ahead)
                self._cond.wait(poll_s)

    def _admit(self, t: Ticket) -> None:
        for q in t.queues:
            self.queues[q].remove(t)
        if t.need.gpus:
            t.held_bytes = [self._bytes(t.need, g) for g in t.gpus]
            for g, b in zip(t.gpus, t.held_bytes):
                self.used[g] += b
                self.running[g] += 1
        else:
            t.held_cores = self._cores(t.need)
            self.cores_used += t.held_cores
            self.cpu_running += 1
        t.admitted = True
        self._cond.notify_all()

    def _withdraw(self, t: Ticket) -> None:
        for q in t.queues:
            if t in self.queues[q]:
                self.queues[q].remove(t)
        t.withdrawn = True
        self._cond.notify_all()

    def release(self, t: Ticket) -> None:
        """The run ended (or never started): its GPU bytes and cores are free again."""
        with self._cond:
            if not t.admitted:
                self._withdraw(t)
                return
            for g, b in zip(t.gpus, t.held_bytes):
                self.used[g] -= b
                self.running[g] -= 1
            if not t.need.gpus:
                self.cores_used -= t.held_cores
                self.cpu_running -= 1
            t.admitted, t.held_bytes, t.held_cores = False, [], 0
            self._cond.notify_all()

    def state(self) -> dict:
        """What runs and waits, for `memlab`'s status and for tests."""
        with self._cond:
            return {"gpus": [{"capacity": c, "used": u, "running": r, "waiting": len(self.queues[f"gpu{g}"])}
                             for g, (c, u, r) in enumerate(zip(self.capacity, self.used, self.running))],
                    "cores": self.cores, "cores_used": self.cores_used,
                    "cpu_waiting": len(self.queues["cpu"])}
