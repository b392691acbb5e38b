"""`WarmPool`: workers started and pre-imported ahead of need, each used once.

A pool key is what a worker cannot change after it starts: the Python that runs it, the
checkout its `lab` comes from, the state of that code when it imported it (an edit or an upgrade
makes a new key, and the spares of the old one stop), and its GPU (CUDA_VISIBLE_DEVICES, read
once by the driver).
For each key in use the pool keeps `spares` workers started (warming up or ready); `take()`
hands out a ready one when there is one, else the one that started first, else a fresh one,
and starts a replacement. Keys unused for a while are dropped with their spares.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from .proc import WorkerProc


@dataclass(frozen=True)
class PoolKey:
    python: str
    root: str
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of its workers; None: as the service's
    code: str = ""  # proc.code_stamp() of the client: the lab code its workers must import


class WarmPool:
    FAILURES_BEFORE_PAUSE = 3  # warm-ups that died in a row before a key stops pre-spawning

    def __init__(self, spares: int = 2, forget_after_s: float = 900.0,
                 may_spawn: Callable[[], bool] | None = None):
        """may_spawn: whether spares may start now. The service says no while runs hold every
        core: a spare importing torch would slow them down, and it is only needed later."""
        self.spares = spares
        self.may_spawn = may_spawn
        self.forget_after_s = forget_after_s
        self._idle: dict[PoolKey, list[WorkerProc]] = {}
        self._last_used: dict[PoolKey, float] = {}
        self._failures: dict[PoolKey, int] = {}
        self._lock = threading.Lock()
        self.closed = False

    def _spawn(self, key: PoolKey) -> WorkerProc:
        env = {"CUDA_VISIBLE_DEVICES": key.gpu} if key.gpu is not None else {}
        return WorkerProc(key.python, key.root, env)

    def take(self, key: PoolKey) -> WorkerProc:
        """A worker for one run on `key`: ready if possible. The caller sends its request."""
        with self._lock:
            stale = self._drop_older_code(key)
            self._last_used[key] = time.monotonic()
            idle = self._idle.setdefault(key, [])
            self._prune(key, idle)
            ready = [w for w in idle if w.ready.is_set()]
            w = ready[0] if ready else (idle[0] if idle else None)
            if w is not None:
                idle.remove(w)
        for old in stale:
            old.kill()
        if w is None:
            w = self._spawn(key)
        self.top_up(key)
        return w

    def _drop_older_code(self, key: PoolKey) -> list[WorkerProc]:
        """Forget the keys of the same Python, checkout and GPU with another code stamp (under
        the lock); their spares, for the caller to stop: they would run the code as it was."""
        older = [k for k in self._idle if k != key and (k.python, k.root, k.gpu)
                 == (key.python, key.root, key.gpu) and k.code != key.code]
        for k in older:
            self._last_used.pop(k, None)
            self._failures.pop(k, None)
        return [w for k in older for w in self._idle.pop(k, [])]

    def _prune(self, key: PoolKey, idle: list[WorkerProc]) -> None:
        """Drop spares that died while warming up (and count it: a broken install must not
        make the pool spawn forever)."""
        for w in [w for w in idle if not w.alive()]:
            idle.remove(w)
            w.kill()
            self._failures[key] = self._failures.get(key, 0) + 1
        if any(w.ready.is_set() for w in idle):
            self._failures[key] = 0

    def top_up(self, key: PoolKey | None = None) -> None:
        """Start spares up to `spares` for `key` (or every key in use)."""
        if self.may_spawn is not None and not self.may_spawn():
            return  # the service tops up again once a core is free
        keys = [key] if key is not None else list(self._idle)
        for k in keys:
            with self._lock:
                if self.closed:
                    return
                idle = self._idle.setdefault(k, [])
                self._prune(k, idle)
                if self._failures.get(k, 0) >= self.FAILURES_BEFORE_PAUSE:
                    continue
                missing = self.spares - len(idle)
            new = [self._spawn(k) for _ in range(max(0, missing))]
            with self._lock:
                self._idle[k].extend(new)

    def forget_idle_keys(self) -> None:
        """Stop the spares of keys nobody used for `forget_after_s` (another checkout, a GPU)."""
        now = time.monotonic()
        with self._lock:
            old = [k for k, t in self._last_used.items() if now - t > self.forget_after_s]
            dropped = [w for k in old for w in self._idle.pop(k, [])]
            for k in old:
                self._last_used.pop(k, None)
        for w in dropped:
            w.kill()

    def count(self) -> dict:
        """Spares started and ready: in all, and per GPU ("cpu": the workers of sim/cpu runs)."""
        with self._lock:
            per = {k: list(ws) for k, ws in self._idle.items()}
        keys: dict[str, dict[str, int]] = {}
        for k, ws in per.items():
            c = keys.setdefault("cpu" if k.gpu is None else f"gpu {k.gpu}", {"spares": 0, "ready": 0})
            c["spares"] += len(ws)
            c["ready"] += sum(w.ready.is_set() for w in ws)
        return {"per_key": self.spares, "spares": sum(c["spares"] for c in keys.values()),
                "ready": sum(c["ready"] for c in keys.values()), "keys": keys}

    def close(self) -> None:
        with self._lock:
            self.closed = True
            ws = [w for idle in self._idle.values() for w in idle]
            self._idle.clear()
        for w in ws:
            w.kill()
