"""Workers forked from a zygote (lab.runner.zygote) are workers like the cold ones: the same
numbers, their exit codes, a kill that stops what they started, and a life past the zygote's.

Slow tier: the zygote imports torch and transformers once (~5 s of a core), as in the service.
"""

from __future__ import annotations

import os
import time

import pytest

from lab.runner.group import drive
from lab.runner.proc import WorkerProc
from lab.course.curriculum import load_lesson
from lab.runner.protocol import RunRequest
from lab.runner.zygote import Zygote

from ..conftest import FIXTURES, ROOT
from .test_runner import alive

pytestmark = pytest.mark.slow
MISBEHAVE_LESSON = load_lesson(FIXTURES / "lessons" / "90-misbehave")
TIMES = {"created", "wall_s", "t", "duration_s", "step_time_s", "timing"}


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    assert z.ready.wait(300), "the zygote never finished its imports"
    yield z
    z.kill()


def run(worker, req: RunRequest, **kw):
    worker.send(req.to_json_dict(), {}, None)
    return drive([worker], req, **kw)


def numbers(value):
    """A result as the learner reads it, less times and dates."""
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    return value


def test_a_forked_worker_measures_what_a_cold_worker_measures(zygote):
    req = RunRequest.for_lesson(load_lesson(ROOT / "lessons" / "08-mixed-precision"), "bf16",
                                "sim", "seed")
    forked = zygote.fork()
    assert forked.pid != zygote.pid
    mine = run(forked, req)
    cold = run(WorkerProc(), req)
    assert mine.status == cold.status == "ok", (mine.error, cold.error)
    assert mine.peak.bytes > 0
    assert numbers(mine.to_dict()) == numbers(cold.to_dict())


def test_exit_codes_come_through_the_zygote(zygote):
    crash = RunRequest.for_lesson(MISBEHAVE_LESSON, "crash", "cpu", "small")
    res = run(zygote.fork(), crash)
    assert res.status == "error" and "exited with code 7" in res.error
    bad = RunRequest.for_lesson(MISBEHAVE_LESSON, "no_such_variant", "cpu", "small")
    w = zygote.fork()
    res = run(w, bad)
    assert res.status == "error" and w.returncode == 2


def test_a_kill_stops_the_worker_and_what_it_started(zygote, tmp_path, monkeypatch):
    pid_file = tmp_path / "pids"
    monkeypatch.setenv("MEMLAB_TEST_PIDFILE", str(pid_file))
    hang = RunRequest.for_lesson(MISBEHAVE_LESSON, "hang", "cpu", "small",
                      timeout_s=60)
    w = zygote.fork()
    w.send(hang.to_json_dict(), {"MEMLAB_TEST_PIDFILE": str(pid_file)}, None)
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    worker_pid, grandchild = map(int, pid_file.read_text().split())
    assert worker_pid == w.pid and w.alive()
    w.kill()
    assert not w.alive() and w.returncode is not None
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild), "the worker's own child survived the kill"


def test_workers_outlive_their_zygote():
    z = Zygote()
    assert z.ready.wait(300)
    w = z.fork()
    assert w.ready.wait(30)
    z.kill()
    assert not z.alive() and w.alive()  # the zygote's group is itself alone
    req = RunRequest.for_lesson(MISBEHAVE_LESSON, "baseline", "cpu", "small")
    res = run(w, req)
    assert res.status == "ok" and res.metrics["sum"] == 2000.0
    deadline = time.monotonic() + 5
    while w.alive() and time.monotonic() < deadline:  # orphaned: watched by its pid
        time.sleep(0.05)
    assert not w.alive() and not alive(w.pid)
    assert os.getpid() != w.pid


def test_a_background_sim_run_gives_way_and_a_timed_run_never_does(zygote):
    def nice(mode, background):
        req = RunRequest.for_lesson(MISBEHAVE_LESSON, "niceness", mode, "small",
                         background=background)
        res = run(zygote.fork(), req)
        assert res.status == "ok", res.error
        return res.metrics["nice"]

    base = os.nice(0)
    assert nice("sim", False) == base
    assert nice("sim", True) > base  # behind the variant the learner waits for
    assert nice("cpu", True) == base  # a step time is a measurement: never slowed on purpose


def test_the_zygotes_warm_up_pays_a_sim_runs_first_checks_and_starts_nothing():
    """warm_up(sim=True) runs sim's once-per-process checks before the zygote forks (a forked
    worker starts with them: lesson 01's first sim run went from 0.11 to 0.03 s in a process),
    without a thread (forking would be unsafe), an entry left in sim's _unsafe_view table or
    CUDA initialised. (The fast key's check leaves its samples in the dispatch cache, as it did
    in every worker's first run.)"""
    import json
    import subprocess
    import sys

    code = ("import json, threading, torch\n"
            "from lab.runner.worker import warm_up\n"
            "warm_up(sim=True)\n"
            "from lab.measure import torch_compat as tc\n"
            "from lab.measure.sim.dispatch import fast_key, lean_output, unsafe_view\n"
            "print(json.dumps([fast_key._AGREES, lean_output._LEAN_AGREES,\n"
            "    lean_output.INFERENCE_VIEWS, unsafe_view._UNSAFE_VIEWS_OK,\n"
            "    threading.active_count(), len(tc.FakeTensorMode.cache),\n"
            "    len(unsafe_view._UNSAFE_VIEWS), torch.cuda.is_initialized(),\n"
            "    tc._aten_ops_with_kernel.cache_info().currsize]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    agrees, lean, views, unsafe, threads, cached, table, cuda, op_sets = json.loads(
        out.stdout.strip().splitlines()[-1])
    assert agrees == lean == views == unsafe == [True]
    assert threads == 1 and table == 0 and not cuda and op_sets == 1 and cached < 100
