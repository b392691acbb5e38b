"""Spawn a worker per variant, stream its events, return a `RunResult` whatever happens.

The worker runs in its own process group (`start_new_session=True`), so timeout and cancel kill
it and anything it started (DataLoader workers, compilers) with one `killpg`. A worker that
crashes or exits without a result becomes a `RunResult` with status "error", its exit code and
the tail of its stderr; the caller never sees an exception for a misbehaving experiment.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Protocol

from lab.measure.result import DeviceInfo, RunResult, Timeline

from .protocol import RunRequest

OnEvent = Callable[[dict], None]
KILL_GRACE_S = 0.5
STDERR_TAIL_LINES = 20
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class Runner(Protocol):
    """What the TUI and CLI need; tests inject a replaying fake."""

    def run(self, request: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult: ...


def _device_for(mode: str) -> DeviceInfo:
    return DeviceInfo({"cuda": "CUDA GPU", "cpu": "CPU", "sim": "simulated (FakeTensorMode)"}
                      .get(mode, mode), mode)


def failed_result(req: RunRequest, lesson_id: str, status: str, error: str,
                  samples: list[dict] | None = None) -> RunResult:
    res = RunResult(lesson=lesson_id, variant=req.variant, mode=req.mode, scale=req.scale,
                    device=_device_for(req.mode), status=status, error=error,
                    simulated=req.mode == "sim")
    if samples:  # what the live stream showed before the end: better than nothing
        res.timeline = Timeline(index=list(range(len(samples))), t=[s["t"] for s in samples],
                                live=[s["live_bytes"] for s in samples], events=len(samples))
    return res


def kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the worker's process group, then SIGKILL what is left after a short grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 1.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # the leader is gone; make sure no child of it survives either
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


class SubprocessRunner:
    def __init__(self, python: str = sys.executable, extra_env: dict[str, str] | None = None):
        self.python = python
        self.extra_env = extra_env or {}

    def _spawn(self, req: RunRequest) -> subprocess.Popen:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.extra_env}
        # the worker must import this very `lab`, also when run from a source checkout
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        return subprocess.Popen(
            [self.python, "-m", "lab.runner.worker", json.dumps(req.to_json_dict())],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=env, text=True, encoding="utf-8", errors="replace",
        )

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        on_event = on_event or (lambda msg: None)
        lesson_id = Path(req.lesson_path).name
        proc = self._spawn(req)
        lines: queue.Queue = queue.Queue()
        stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

        def pump_stdout():
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        def pump_stderr():
            for line in proc.stderr:
                stderr_tail.append(line.rstrip())

        threading.Thread(target=pump_stdout, daemon=True).start()
        err_thread = threading.Thread(target=pump_stderr, daemon=True)
        err_thread.start()

        deadline = time.monotonic() + req.timeout_s
        samples: list[dict] = []
        result: RunResult | None = None
        error: str | None = None
        while True:
            if cancel is not None and cancel.is_set():
                kill_group(proc)
                return failed_result(req, lesson_id, "cancelled", "cancelled by the user", samples)
            if time.monotonic() > deadline:
                kill_group(proc)
                return failed_result(req, lesson_id, "timeout",
                                     f"no result after {req.timeout_s:g} s; the worker was stopped",
                                     samples)
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                continue
            if line is None:
                break
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                stderr_tail.append(line.rstrip())
                continue
            kind = msg.get("type")
            if kind == "started":
                lesson_id = msg.get("lesson", lesson_id)
            elif kind == "sample":
                samples.append(msg)
            elif kind == "result":
                result = RunResult.from_dict(msg["result"])
            elif kind == "error":
                error = msg.get("error", "unknown error")
            on_event(msg)

        code = proc.wait()
        err_thread.join(timeout=1)
        kill_group(proc)  # anything the worker left behind in its group
        if result is not None:
            return result
        if error is None:
            tail = " | ".join(list(stderr_tail)[-3:]) or "no output"
            error = f"the worker exited with code {code} before reporting a result: {tail}"
        res = failed_result(req, lesson_id, "error", error, samples)
        res.notes.append("stderr tail:\n" + "\n".join(stderr_tail))
        return res
