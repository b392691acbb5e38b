"""Runners: what the app and the CLI call to measure a variant, whatever happens to the worker.

    runner = default_runner()          # the machine's runner service, else a direct worker
    result = runner.run(request, on_event=print, cancel=threading.Event())

`Runner` is the protocol the TUI and CLI depend on (tests inject `ReplayRunner`).
`SubprocessRunner` spawns a worker per variant (N for N ranks) itself: the fallback when the
runner service cannot be reached, and what tests of the worker use. A worker that crashes,
hangs past its timeout or exits without a result becomes a `RunResult` with that status; the
caller never sees an exception for a misbehaving experiment.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Callable, Protocol

from lab.measure.result import RunResult

from .admission import Admission, Need
from .group import check_request, drive, free_port, rank_env
from .proc import PROJECT_ROOT, WorkerProc, kill_group  # noqa: F401  (kill_group: re-exported)
from .protocol import RunRequest
from .stream import failed_result  # noqa: F401  (re-exported: callers build failed results)
from .stream import WorkerStream

OnEvent = Callable[[dict], None]
RUNNER_ENV = "MEMLAB_RUNNER"  # "direct": never use the runner service


class Runner(Protocol):
    """What the TUI and CLI need; tests inject a replaying fake."""

    def run(self, request: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult: ...


class SubprocessRunner:
    """Spawn the worker(s) of each run here, in this process's own children.

    gpus: how many GPUs this process may hand out (cuda): each run gets whole GPUs, one per
    rank, through CUDA_VISIBLE_DEVICES, and waits for them when all are taken. 0: do not
    choose (the worker sees what this process sees; ranks get GPUs 0..N-1).
    """

    def __init__(self, python: str = sys.executable, extra_env: dict[str, str] | None = None,
                 gpus: int = 0):
        self.python = python
        self.extra_env = extra_env or {}
        self.gpus = Admission([1] * gpus, os.cpu_count() or 1) if gpus else None
        # how many runs a caller should keep in flight (loop.run_all): one per GPU it hands out
        self.parallel = max(1, gpus)

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        problem = check_request(req)
        if problem:
            return WorkerStream(req).failed("error", problem)
        ticket = None
        if self.gpus is not None and req.mode_info.on_gpu:
            try:
                ticket = self.gpus.submit(Need(gpus=req.ranks))
            except ValueError as e:
                return WorkerStream(req).failed("error", str(e))
            if not self.gpus.wait(ticket, cancel, on_wait=_status(on_event)):
                return WorkerStream(req).failed("cancelled", "cancelled while waiting for a GPU")
        try:
            workers = self._spawn(req, ticket.gpus if ticket else None)
            return drive(workers, req, on_event, cancel)
        finally:
            if ticket is not None:
                self.gpus.release(ticket)

    def _spawn(self, req: RunRequest, gpus: list[int] | None) -> list[WorkerProc]:
        port = free_port() if req.ranks > 1 else 0
        # GPU g of this process is entry g of its own CUDA_VISIBLE_DEVICES, when it has one
        seen = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        workers: list[WorkerProc] = []
        try:
            for r in range(req.ranks):
                env = dict(self.extra_env)
                if req.ranks > 1:
                    env.update(rank_env(r, req.ranks, port))
                g = gpus[r] if gpus is not None else (r if req.ranks > 1 and req.mode_info.on_gpu else None)
                if g is not None and "CUDA_VISIBLE_DEVICES" not in self.extra_env:
                    env["CUDA_VISIBLE_DEVICES"] = seen[g] if g < len(seen) else str(g)
                workers.append(WorkerProc(self.python, PROJECT_ROOT, env, request=req.to_json_dict()))
        except BaseException:
            for w in workers:
                w.kill()
            raise
        return workers


def _status(on_event: OnEvent | None):
    def on_wait(text: str, ahead: int) -> None:
        if on_event is not None:
            on_event({"type": "status", "stage": "waiting", "text": text, "ahead": ahead})
    return on_wait


def default_runner(**direct) -> Runner:
    """The machine's runner service (started on demand), falling back to `SubprocessRunner`
    where it cannot be reached; MEMLAB_RUNNER=direct skips the service."""
    fallback = SubprocessRunner(**direct)
    if os.environ.get(RUNNER_ENV, "").lower() == "direct":
        return fallback
    from .remote import ServiceRunner

    return ServiceRunner(fallback=fallback)
