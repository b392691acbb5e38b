"""Clean step times on a shared GPU: runs measure memory side by side and time their steps alone.

Admission (admission.py) lets runs share a GPU when their recorded peaks fit together. Memory
is per run, but the SMs are not: on one H200, eight queued lesson-03 runs, two or three at a
time, stepped in 1.86-1.95 s against 0.898 s alone. So every CUDA run takes turns through its
GPU's reader/writer lock:

- the tracked pass (memory: what the lessons are about, slowed by the tracker anyway) holds it
  as a reader, beside the other runs' tracked passes, and lets a waiting timer in between two
  of its phases (its GPU work synchronised first), so a timed pass waits for the phases that
  run now, not for whole passes (the course packed on one H200 took 211 s with whole passes);
- the timed pass (step time, throughput, NVML's busy %) holds it as the writer, alone on the GPU.

`filelock.ReadWriteLock` is SQLite's lock, and the hold of a process that dies or is killed (Esc,
timeout) goes with it. SQLite lets a waiting writer stop new readers only while it retries, so a
reader that lets go and takes the lock again at once can get in first (seen under load): a
turnstile (`filelock.FileLock` beside it) makes the order sure. A timer holds the turnstile from
before it waits until it is done; a reader passes through it before each hold, so it waits
while a timer waits or times. A run of N ranks: rank 0 holds every rank's GPU, in GPU order, so
two multi-GPU runs cannot each hold half of what the other needs; its other ranks wait in their
collectives.

The runner service names the lock files in MEMLAB_GPU_TURNS (os.pathsep-separated); without it
(the direct runner, tests, sim and cpu runs) a run takes no turns.
"""

from __future__ import annotations

import os
import re
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Callable, Iterator

TURNS_ENV = "MEMLAB_GPU_TURNS"


def turns_path(directory: Path, gpu_id: str) -> Path:
    """One lock file per physical GPU ("0", "GPU-5f3c…"): the same file for every run on it."""
    return Path(directory) / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', gpu_id)}.turns"


class GpuTurns:
    def __init__(self, paths: list[str]):
        from filelock import ReadWriteLock

        from filelock import FileLock

        # is_singleton=False: the lock of this process alone, never shared with another instance
        self.paths = sorted(set(paths))
        self._locks = [ReadWriteLock(p, is_singleton=False) for p in self.paths]
        self._turnstiles = [FileLock(p + ".turnstile", is_singleton=False) for p in self.paths]

    @classmethod
    def from_env(cls) -> "GpuTurns | None":
        paths = [p for p in os.environ.get(TURNS_ENV, "").split(os.pathsep) if p]
        return cls(paths) if paths else None

    @contextmanager
    def measuring(self) -> Iterator["_ReadHold"]:
        """Beside other runs' measuring, never during another run's timing."""
        hold = _ReadHold(self._locks, self._turnstiles)
        hold.acquire()
        try:
            yield hold
        finally:
            hold.release()

    @contextmanager
    def timing(self, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
        """Alone on the GPU(s); `on_wait()` is called once if another run holds one now."""
        from filelock import Timeout

        with ExitStack() as stack:
            for turnstile, lock in zip(self._turnstiles, self._locks):
                for acquire in (turnstile.acquire, lock.write_lock):
                    try:
                        stack.enter_context(acquire(blocking=False))
                    except Timeout:
                        if on_wait is not None:
                            on_wait()
                            on_wait = None
                        stack.enter_context(acquire())
            yield


class _ReadHold:
    """A measuring run's hold on its GPU(s), given up and taken again between two phases."""

    def __init__(self, locks, turnstiles):
        self._locks, self._turnstiles, self._stack = locks, turnstiles, ExitStack()

    def acquire(self) -> None:
        for turnstile, lock in zip(self._turnstiles, self._locks):
            with turnstile:  # through it: wait while a timer waits or times
                pass
            self._stack.enter_context(lock.read_lock())

    def release(self) -> None:
        self._stack.close()
        self._stack = ExitStack()

    def let_timers_in(self) -> None:
        """A run waiting to time its steps goes now (a waiting writer keeps new readers out)."""
        self.release()
        self.acquire()
