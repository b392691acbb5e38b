"""Drive one run to its end: 1 worker, or N ranks of torch.distributed started like torchrun.

`drive()` reads every rank's lines (the one parser, `WorkerStream`), passes events on (with
"rank" when there are several), and ends the run on the first of: every rank done, cancel,
timeout, or the failure of any rank (a crash, an OOM, an error) — then the whole group is torn
down, since the other ranks would wait forever in their next collective. The result is rank 0's,
with every rank in `RunResult.ranks`; a failure names the rank ("rank 1 of 2: ...").

Rank environment, as torchrun sets it: MASTER_ADDR, MASTER_PORT (a free localhost port),
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; each rank gets one GPU (CUDA_VISIBLE_DEVICES,
so the worker's `cuda:0` is its own GPU) and nccl, or gloo on cpu.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import signal
import socket
import threading
import time
from typing import Callable

from lab.measure.result import RunResult

from .proc import WorkerProc
from .protocol import RunRequest
from .stream import WorkerStream

OnEvent = Callable[[dict], None]
AFTER_RESULT_S = 5.0  # a worker that said its result but does not exit is stopped after this
SETTLE_S = 1.0  # after a rank fails, how long the other ranks' reports still count
POLL_S = 0.02


def free_port() -> int:
    """A free localhost port for the rendezvous (bound and released, as torchrun does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world: int, port: int) -> dict[str, str]:
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
            "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
            # torchrun's default for several processes on one machine: no oversubscribed cores
            **({"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")} if world > 1 else {})}


def check_request(req: RunRequest) -> str | None:
    """Why this request cannot run, in one line, or None."""
    if not isinstance(req.ranks, int) or req.ranks < 1:
        return f"ranks must be a whole number from 1 up, not {req.ranks!r}"
    if req.ranks > 1 and req.mode_info.ranks_in_one_process:
        return ("ranks > 1 runs real processes (gloo on cpu, nccl on cuda); sim does not start "
                "one worker per rank")
    return None


def kill_all(workers: list[WorkerProc]) -> None:
    """Tear the group down at once: SIGTERM every group, then SIGKILL what is left."""
    for sig, grace in ((signal.SIGTERM, 0.5), (signal.SIGKILL, 0.0)):
        for w in workers:
            try:
                os.killpg(w.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while grace and any(w.alive() for w in workers) and time.monotonic() < deadline:
            time.sleep(0.02)
    for w in workers:
        w.kill()  # reap, close stdin; no-op for the dead


def drive(workers: list[WorkerProc], req: RunRequest, on_event: OnEvent | None = None,
          cancel: threading.Event | None = None, timeout_s: float | None = None) -> RunResult:
    """Follow `workers` (rank r = workers[r], requests already given) to one combined result."""
    on_event = on_event or (lambda msg: None)
    n = len(workers)
    streams = [WorkerStream(req) for _ in workers]
    results: list[RunResult | None] = [None] * n
    open_ranks = set(range(n))
    said_result: dict[int, float] = {}
    failures: list[tuple[int, float, int]] = []  # (0 = died without a result / 1 = failed result, when, rank)
    stop: tuple[str, str] | None = None  # (status, error) for ranks stopped from outside
    deadline = time.monotonic() + (req.timeout_s if timeout_s is None else timeout_s)
    who = "worker" if n == 1 else "group"

    turn_waits: dict[int, float] = {}

    def wait_for_turn(r: int, msg: dict) -> None:
        """A worker waiting for the GPU to itself (lab.runner.gpu_turns) is not using its time:
        the deadline moves by as long as it waited."""
        nonlocal deadline
        if r in turn_waits:
            deadline += time.monotonic() - turn_waits.pop(r)
        if msg.get("type") == "status" and msg.get("turn"):
            turn_waits[r] = time.monotonic()

    def end_rank(r: int) -> None:
        open_ranks.discard(r)
        finished = streams[r].finished
        results[r] = res = streams[r].outcome(workers[r].finish(), workers[r].stderr_tail)
        if res.status != "ok" and n > 1:
            failures.append((1 if finished else 0, time.monotonic(), r))

    def settled() -> bool:
        """After a rank fails, the others' failures that follow from it (a collective whose peer
        is gone) arrive within moments: wait that long, so the first cause is the one named."""
        return bool(failures) and time.monotonic() - min(f[1] for f in failures) > SETTLE_S

    def pump(r: int) -> bool:
        """Take in what rank r wrote since last time; True when there was something."""
        w, s, got = workers[r], streams[r], False
        while r in open_ranks:
            try:
                line = w.lines.get_nowait()
            except queue.Empty:
                break
            got = True
            if line is None:
                end_rank(r)
                break
            msg = s.feed_line(line)
            if msg is not None:
                on_event(msg if n == 1 else {**msg, "rank": r})
                wait_for_turn(r, msg)
            if s.finished and r not in said_result:
                said_result[r] = time.monotonic()
                if n == 1 or s.error or (s.result is not None and s.result.status != "ok"):
                    # single use: what is left is interpreter teardown (~0.5 s with torch),
                    # which nobody needs to wait for; a failed rank ends now
                    w.kill()
        if r in open_ranks and r in said_result and time.monotonic() - said_result[r] > AFTER_RESULT_S:
            w.kill()  # it said its result but does not exit: enough
        return got

    try:
        while open_ranks and not settled():
            if cancel is not None and cancel.is_set():
                stop = ("cancelled", "cancelled by the user")
                break
            if time.monotonic() > deadline and not turn_waits:
                stop = ("timeout", f"no result after {req.timeout_s:g} s; the {who} was stopped")
                break
            if not any([pump(r) for r in sorted(open_ranks)]):
                time.sleep(POLL_S)
    except BaseException:  # Ctrl+C in the caller: the workers live in sessions of their own
        kill_all(workers)
        raise

    failed = min(failures)[2] if failures else None  # died first, else failed first
    if open_ranks:
        kill_all([workers[r] for r in open_ranks])
        for r in sorted(open_ranks):
            if streams[r].result is not None:  # said its result before the group was stopped
                end_rank(r)
                continue
            results[r] = streams[r].failed(*(stop or ("cancelled", f"stopped: rank {failed} of {n} failed")))
            workers[r].finish(timeout=0.5)
    return combine(results, failed)


def combine(results: list[RunResult], failed: int | None) -> RunResult:
    """One rank: its result. Several: rank 0's numbers on top, every rank in `ranks`, and the
    first failed rank's status and error (named) when one failed."""
    if len(results) == 1:
        return results[0]
    top = dataclasses.replace(results[0], ranks=list(results), notes=list(results[0].notes))
    if failed is not None:
        bad = results[failed]
        top.status = bad.status
        top.error = f"rank {failed} of {len(results)}: {bad.error or bad.status}"
    elif any(r.status != "ok" for r in results):  # stopped from outside: rank 0 says how
        top.status, top.error = results[0].status, results[0].error
    return top
