"""`WarmPool`: workers imported ahead of need, each used once.

A pool key is what a worker cannot change after it starts: the Python that runs it, the
checkout its `lab` comes from, the state of that code when it imported it (an edit or an upgrade
makes a new key, and the old key's workers stop), and its GPU (CUDA_VISIBLE_DEVICES, read once
by the driver).

For each key of sim and cpu runs the pool keeps a zygote (lab.runner.zygote): one process that
imports torch, transformers and the lab's measure code once and forks a fresh worker for each
run in milliseconds. `take()` forks from it, waiting for it while it imports (a cold worker
started then would only race it for the same cores). The keys of GPU runs, and a key whose
zygote cannot be had (it died `FAILURES_BEFORE_PAUSE` times while importing, or zygotes are off:
MEMLAB_RUNNER_ZYGOTE=0), keep `spares` workers started and pre-imported one by one.
Keys unused for a while are dropped with their zygote and spares.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .proc import WorkerProc
from .zygote import Zygote, ZygoteGone

ZYGOTE_ENV = "MEMLAB_RUNNER_ZYGOTE"
ZYGOTE_WAIT_S = 120.0  # a zygote importing on a loaded laptop: a take() waits this long for it


@dataclass(frozen=True)
class PoolKey:
    python: str
    root: str
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of its workers; None: as the service's
    code: str = ""  # proc.code_stamp() of the client: the lab code its workers must import

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.gpu} if self.gpu is not None else {}


class WarmPool:
    FAILURES_BEFORE_PAUSE = 3  # warm-ups that died in a row before a key stops starting them

    def __init__(self, spares: int = 2, forget_after_s: float = 900.0,
                 may_spawn: Callable[[], bool] | None = None, zygotes: bool | None = None):
        """may_spawn: whether an import may start now. The service says no while runs hold
        every core: a process importing torch would slow them down, and it is only needed
        later. A fork from a ready zygote costs nothing and is never deferred."""
        self.spares = spares
        self.may_spawn = may_spawn
        self.forget_after_s = forget_after_s
        self.use_zygotes = (os.environ.get(ZYGOTE_ENV, "1") != "0") if zygotes is None else zygotes
        self._idle: dict[PoolKey, list] = {}
        self._zygotes: dict[PoolKey, Zygote] = {}
        self._last_used: dict[PoolKey, float] = {}
        self._failures: dict[PoolKey, int] = {}
        self._lock = threading.Lock()
        self.closed = False

    # ---- processes (tests replace these) ----------------------------------------------------
    def _spawn(self, key: PoolKey):
        """A worker that imports for itself (the way without a zygote)."""
        return WorkerProc(key.python, key.root, key.env())

    def _start_zygote(self, key: PoolKey):
        return Zygote(key.python, key.root, key.env())

    # ---- handing out workers ----------------------------------------------------------------
    def take(self, key: PoolKey):
        """A worker for one run on `key`: forked from its zygote, else a ready spare, else the
        spare that started first, else a fresh one. The caller sends its request."""
        with self._lock:
            stale = self._drop_older_code(key)
            self._last_used[key] = time.monotonic()
            idle = self._idle.setdefault(key, [])
            self._prune(key, idle)
            z = self._zygote_for(key)
        for old in stale:
            old.kill()
        if z is not None:
            w = self._fork(key, z)
            if w is not None:
                return w
        with self._lock:
            idle = self._idle.setdefault(key, [])
            ready = [w for w in idle if w.ready.is_set()]
            w = ready[0] if ready else (idle[0] if idle else None)
            if w is not None:
                idle.remove(w)
        if w is None:
            w = self._spawn(key)
        self.top_up(key)
        return w

    def ready_for(self, key: PoolKey) -> bool:
        """Whether `take(key)` would hand out a worker that has imported already."""
        with self._lock:
            z = self._zygotes.get(key)
            return bool((z is not None and z.ready.is_set() and z.alive())
                        or any(w.ready.is_set() for w in self._idle.get(key, [])))

    def _zygote_for(self, key: PoolKey):
        """The key's zygote, started if there is none and zygotes are to be had (under the lock).
        Only for keys without a GPU (sim and cpu runs): a CUDA worker must not be the fork of a
        process in which anything may have initialised the CUDA driver (torch.cuda.is_available()
        does, and an import may call it), and its imports are not what a GPU run waits on."""
        if not self.use_zygotes or self.closed or key.gpu is not None:
            return None
        z = self._zygotes.get(key)
        if z is not None and not z.alive():
            del self._zygotes[key]
            if not z.ready.is_set():  # died importing: a broken install must not loop
                self._failures[key] = self._failures.get(key, 0) + 1
            z = None
        if z is None and self._failures.get(key, 0) < self.FAILURES_BEFORE_PAUSE:
            z = self._zygotes[key] = self._start_zygote(key)
        return z

    def _fork(self, key: PoolKey, z):
        """A worker forked from `z`, once it has imported; None if it died or never got there."""
        deadline = time.monotonic() + ZYGOTE_WAIT_S
        while not z.ready.wait(0.1):
            if not z.alive() or time.monotonic() > deadline:
                return None
        try:
            w = z.fork()
        except ZygoteGone:
            return None
        with self._lock:
            self._failures[key] = 0
        return w

    def _drop_older_code(self, key: PoolKey) -> list:
        """Forget the keys of the same Python, checkout and GPU with another code stamp (under
        the lock); their spares and zygotes, for the caller to stop: they would run the code as
        it was."""
        older = [k for k in {*self._idle, *self._zygotes} if k != key and (k.python, k.root, k.gpu)
                 == (key.python, key.root, key.gpu) and k.code != key.code]
        for k in older:
            self._last_used.pop(k, None)
            self._failures.pop(k, None)
        return [*(w for k in older for w in self._idle.pop(k, [])),
                *(z for k in older if (z := self._zygotes.pop(k, None)) is not None)]

    def _prune(self, key: PoolKey, idle: list) -> None:
        """Drop spares that died while warming up (and count it: a broken install must not
        make the pool spawn forever)."""
        for w in [w for w in idle if not w.alive()]:
            idle.remove(w)
            w.kill()
            self._failures[key] = self._failures.get(key, 0) + 1
        if any(w.ready.is_set() for w in idle):
            self._failures[key] = 0

    def top_up(self, key: PoolKey | None = None) -> None:
        """Have `key` (or every key in use) ready ahead of need: its zygote started, or, without
        one, spares up to `spares`."""
        if self.spares == 0 or (self.may_spawn is not None and not self.may_spawn()):
            return  # none ahead of need; or later: the service tops up again once a core is free
        keys = [key] if key is not None else list({*self._idle, *self._zygotes})
        for k in keys:
            with self._lock:
                if self.closed:
                    return
                idle = self._idle.setdefault(k, [])
                self._prune(k, idle)
                if self._zygote_for(k) is not None:
                    continue
                if self._failures.get(k, 0) >= self.FAILURES_BEFORE_PAUSE:
                    continue
                missing = self.spares - len(idle)
            new = [self._spawn(k) for _ in range(max(0, missing))]
            with self._lock:
                self._idle[k].extend(new)

    def forget_idle_keys(self) -> None:
        """Stop the zygotes and spares of keys nobody used for `forget_after_s` (another
        checkout, a GPU)."""
        now = time.monotonic()
        with self._lock:
            old = [k for k, t in self._last_used.items() if now - t > self.forget_after_s]
            dropped = [w for k in old for w in self._idle.pop(k, [])]
            dropped += [z for k in old if (z := self._zygotes.pop(k, None)) is not None]
            for k in old:
                self._last_used.pop(k, None)
        for w in dropped:
            w.kill()

    def count(self) -> dict:
        """Per key kind ("cpu": the workers of sim/cpu runs; "gpu N"): spares started and ready
        (a ready zygote counts as `per_key` ready spares: it forks one per run at once), and the
        zygote's state ("ready", "importing" or "none")."""
        with self._lock:
            per = {k: list(ws) for k, ws in self._idle.items()}
            zyg = dict(self._zygotes)
        keys: dict[str, dict] = {}
        for k in {*per, *zyg}:
            c = keys.setdefault("cpu" if k.gpu is None else f"gpu {k.gpu}",
                                {"spares": 0, "ready": 0, "zygote": "none"})
            ws, z = per.get(k, []), zyg.get(k)
            c["spares"] += len(ws)
            c["ready"] += sum(w.ready.is_set() for w in ws)
            if z is not None and z.alive():
                c["zygote"] = "ready" if z.ready.is_set() else "importing"
                if z.ready.is_set():
                    c["spares"] += self.spares
                    c["ready"] += self.spares
        return {"per_key": self.spares, "spares": sum(c["spares"] for c in keys.values()),
                "ready": sum(c["ready"] for c in keys.values()), "keys": keys}

    def close(self) -> None:
        with self._lock:
            self.closed = True
            ws = [w for idle in self._idle.values() for w in idle]
            ws += list(self._zygotes.values())
            self._idle.clear()
            self._zygotes.clear()
        for w in ws:
            w.kill()
