"""The ONE run loop: a list of requests, N at a time, results in order.

    results = run_all(runner, requests, jobs=None, on_event=..., on_result=..., cancel=...)

Used by `memlab run`, `memlab compare` and the app's lesson screen. `jobs=None` asks the runner
how many runs to keep in flight (`runner.parallel`: 1 for a direct or replaying runner; many for
the runner service, whose queue then decides what runs together, one GPU each or sharing one
when the recorded peaks fit). `announce=True`: each run's first event is `{"type": "queued"}`,
before its runner is called (a UI resets its live view there).
`on_event(i, msg)` hears run i's events (from several threads when jobs > 1); `on_result(i,
result)` is called in request order, as soon as every earlier run has ended. A runner that
raises is reported like a crashed worker. After `cancel` (or `stop()` returning True) no new run
starts, runs in flight are cancelled by the runner, and the results of runs that started are
returned (in order).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from lab.measure.modes import mode_info
from lab.measure.result import RunResult

from .admission import usable_cores
from .protocol import RunRequest
from .stream import WorkerStream

OnEvent = Callable[[int, dict], None]
ORDER_WAIT_S = 2.0  # long enough for the runner service to start on demand
OnResult = Callable[[int, RunResult], None]


SIDE_BY_SIDE_MAX = 4  # a lesson's sim variants at once: each worker holds ~0.5-2 GB


def side_by_side(mode: str, cores: int | None = None) -> int:
    """How many of a lesson's variants the app runs at once. Untimed runs (sim) take one core
    each and measure no time, so they run one per core (a lesson's `y` on 2 cores: about half
    the wait); timed runs (cpu, cuda) one at a time, since a step time is a measurement and two
    runs would share the machine."""
    if mode_info(mode).timed:
        return 1
    return max(1, min(usable_cores() if cores is None else cores, SIDE_BY_SIDE_MAX))


def run_one(runner, req: RunRequest, on_event=None, cancel=None) -> RunResult:
    try:
        return runner.run(req, on_event=on_event, cancel=cancel)
    except Exception as e:  # a broken runner is reported like a crashed worker
        return WorkerStream(req).failed("error", f"the runner failed: {type(e).__name__}: {e}")


def run_all(runner, requests: list[RunRequest], *, jobs: int | None = None,
            on_event: OnEvent | None = None, on_result: OnResult | None = None,
            cancel: threading.Event | None = None,
            stop: Callable[[], bool] | None = None, announce: bool = False) -> list[RunResult]:
    cancel = cancel if cancel is not None else threading.Event()
    jobs = max(1, min(jobs or getattr(runner, "parallel", 1), len(requests) or 1))
    results: list[RunResult | None] = [None] * len(requests)
    started = [False] * len(requests)
    lock = threading.Lock()
    delivered = 0

    def stopped() -> bool:
        return cancel.is_set() or (stop is not None and stop())

    def deliver() -> None:
        """Hand out finished results in request order (under `lock`)."""
        nonlocal delivered
        while delivered < len(requests):
            if results[delivered] is not None:
                if on_result is not None:
                    on_result(delivered, results[delivered])
            elif started[delivered] or not stopped():
                return  # still running, or yet to start
            delivered += 1  # (a run that never started has nothing to hand out)

    # runs reach a queue in request order: run i is handed over once run i-1 has been heard
    # from (the service answers at once, "waiting ..." or "starting ...") or after a moment
    heard = [threading.Event() for _ in requests]

    def one(i: int) -> None:
        if i and jobs > 1:
            heard[i - 1].wait(ORDER_WAIT_S)
        with lock:
            if stopped():
                heard[i].set()
                deliver()
                return
            started[i] = True

        def ev(msg: dict) -> None:
            heard[i].set()
            if on_event is not None:
                on_event(i, msg)

        if announce and on_event is not None:
            on_event(i, {"type": "queued"})  # ours, not the runner's: it does not count as heard
        res = run_one(runner, requests[i], ev, cancel)
        heard[i].set()
        with lock:
            results[i] = res
            deliver()

    if jobs == 1:  # in the caller's thread: what it sees (a Textual worker) stays the same
        for i in range(len(requests)):
            one(i)
    else:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="memlab-run") as pool:
            futures = [pool.submit(one, i) for i in range(len(requests))]
            try:
                for f in futures:
                    f.result()
            except BaseException:  # Ctrl+C: cancel what runs, so leaving the pool is quick
                cancel.set()
                raise
    return [r for r, s in zip(results, started) if s and r is not None]
