"""Runs on one GPU measure side by side and time their steps alone (lab.runner.gpu_turns).

The lock is exercised for real (SQLite's reader/writer lock over a file), with threads standing
in for worker processes where that suffices and a killed process where it does not.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

from lab.runner.gpu_turns import TURNS_ENV, GpuTurns, turns_path
from lab.runner.group import drive
from lab.runner.protocol import RunRequest
from lab.runner.service import Service


def _in_thread(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_measuring_runs_share_the_gpu(tmp_path):
    path = str(turns_path(tmp_path, "0"))
    a, b = GpuTurns([path]), GpuTurns([path])
    with a.measuring():
        got = threading.Event()
        _in_thread(lambda: (b.measuring().__enter__(), got.set()))
        assert got.wait(5), "a second measuring run waited for the first"


def test_timing_waits_for_measuring_runs_and_says_so(tmp_path):
    path = str(turns_path(tmp_path, "0"))
    measuring, timer = GpuTurns([path]), GpuTurns([path])
    said, timed = [], threading.Event()

    def time_steps():
        with timer.timing(on_wait=lambda: said.append(time.monotonic())):
            timed.set()

    with measuring.measuring():
        _in_thread(time_steps)
        assert not timed.wait(0.5), "the timed pass ran while another run was measuring"
        assert len(said) == 1
    assert timed.wait(5), "the timed pass did not start when the GPU was free"


def test_a_waiting_timer_goes_before_later_measuring_runs(tmp_path):
    """Writer preference: a stream of tracked passes cannot starve a timed pass."""
    path = str(turns_path(tmp_path, "0"))
    first, timer, late = GpuTurns([path]), GpuTurns([path]), GpuTurns([path])
    order: list[str] = []
    release_first, timer_in = threading.Event(), threading.Event()

    def hold_first():
        with first.measuring():
            release_first.wait(10)

    def time_steps():
        with timer.timing(on_wait=timer_in.set):
            order.append("timer")
            time.sleep(0.3)
        order.append("timer done")

    def measure_late():
        with late.measuring():
            order.append("late")

    t1 = _in_thread(hold_first)
    time.sleep(0.2)
    t2 = _in_thread(time_steps)
    assert timer_in.wait(5)
    time.sleep(0.2)
    t3 = _in_thread(measure_late)
    time.sleep(0.3)
    assert order == [], "someone ran while the first run measured"
    release_first.set()
    for t in (t1, t2, t3):
        t.join(10)
    assert order == ["timer", "timer done", "late"]


def test_a_measuring_run_lets_a_waiting_timer_in_between_two_phases(tmp_path):
    path = str(turns_path(tmp_path, "0"))
    measuring, timer = GpuTurns([path]), GpuTurns([path])
    order: list[str] = []
    waiting = threading.Event()

    def time_steps():
        with timer.timing(on_wait=waiting.set):
            order.append("timer")
            time.sleep(0.2)

    with measuring.measuring() as hold:
        t = _in_thread(time_steps)
        assert waiting.wait(5)
        order.append("phase 1")
        hold.let_timers_in()  # returns once the timer is done
        order.append("phase 2")
    t.join(5)
    assert order == ["phase 1", "timer", "phase 2"]


def test_a_killed_run_gives_its_turn_back(tmp_path):
    path = str(turns_path(tmp_path, "GPU-5f3c:0"))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from lab.runner.gpu_turns import GpuTurns\n"
         f"t = GpuTurns([{path!r}])\n"
         "with t.timing():\n print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        waiting, got = GpuTurns([path]), threading.Event()
        _in_thread(lambda: (waiting.measuring().__enter__(), got.set()))
        assert not got.wait(0.5)
        holder.kill()
        assert got.wait(10), "the killed process's hold outlived it"
    finally:
        holder.kill()
        holder.wait()


def test_turns_path_is_one_safe_file_name_per_gpu(tmp_path):
    p = turns_path(tmp_path, "GPU-5f3c/../x")
    assert p.parent == tmp_path and "/" not in p.name
    assert turns_path(tmp_path, "1") != turns_path(tmp_path, "0")


def test_no_turns_without_the_service(monkeypatch):
    monkeypatch.delenv(TURNS_ENV, raising=False)
    assert GpuTurns.from_env() is None
    monkeypatch.setenv(TURNS_ENV, "")
    assert GpuTurns.from_env() is None


def test_the_service_gives_rank_0_of_a_cuda_run_every_gpu_of_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path))
    service = Service.__new__(Service)  # only its GPU ids are needed here
    service.gpu_ids = ["GPU-a", "GPU-b"]

    class Ticket:
        gpus = [1, 0]

    req = RunRequest("many-gpus", "ddp", mode="cuda", ranks=2)
    env0 = service._turns_env(req, Ticket, 0)[TURNS_ENV].split(os.pathsep)
    assert sorted(os.path.basename(p) for p in env0) == ["gpu-GPU-a.turns", "gpu-GPU-b.turns"]
    assert service._turns_env(req, Ticket, 1) == {TURNS_ENV: ""}
    sim = RunRequest("many-gpus", "ddp", mode="sim")
    assert service._turns_env(sim, Ticket, 0) == {TURNS_ENV: ""}


class _ScriptedWorker:
    """What `drive` reads from a worker: protocol lines, on a schedule."""

    pid = 2**30  # no such process: drive's kill_all finds nothing to signal

    def __init__(self, script: list[tuple[float, dict]]):
        self.lines: queue.Queue = queue.Queue()
        self.stderr_tail: list[str] = []
        self._done = threading.Event()

        def play():
            for delay, msg in script:
                time.sleep(delay)
                self.lines.put(json.dumps(msg))
            self.lines.put(None)
            self._done.set()

        _in_thread(play)

    def alive(self) -> bool:
        return not self._done.is_set()

    def finish(self, timeout: float = 2.0) -> int | None:
        self._done.wait(timeout)
        return 0

    def kill(self) -> None:
        pass


@pytest.mark.slow  # waits through a turn (~4 s): the full suite's
def test_waiting_for_a_turn_does_not_count_against_the_timeout():
    from lab.measure.result import DeviceInfo, RunResult

    req = RunRequest("linear-baseline", "baseline", mode="cuda", timeout_s=1.0)
    result = RunResult(lesson="linear-baseline", variant="baseline", mode="cuda", scale="seed",
                       device=DeviceInfo("GPU", "cuda", None, None))
    worker = _ScriptedWorker([
        (0.1, {"type": "started", "pid": 1, "lesson": "linear-baseline", "variant": "baseline"}),
        (0.1, {"type": "status", "stage": "waiting", "turn": True, "text": "waiting to time the steps alone"}),
        (1.5, {"type": "status", "stage": "timing", "text": "timing pass (untracked)"}),
        (0.2, {"type": "result", "result": result.to_dict()}),
    ])
    assert drive([worker], req).status == "ok"

    stuck = _ScriptedWorker([(0.1, {"type": "started", "pid": 1}),
                             (3.0, {"type": "result", "result": result.to_dict()})])
    assert drive([stuck], req).status == "timeout"
