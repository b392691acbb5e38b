"""One process per variant: crash, hang, OOM and cancel never take the caller down.

Uses the fixture lesson tests/fixtures/lessons/90-misbehave, whose variants misbehave on purpose.
"""

import os
import threading
import time

import pytest

from lab.course.curriculum import load_lesson
from lab.runner.client import SubprocessRunner
from lab.runner.protocol import RunRequest

from ..conftest import FIXTURES

LESSON = load_lesson(FIXTURES / "lessons" / "90-misbehave")
pytestmark = pytest.mark.slow


def request(variant, **kw):
    return RunRequest.for_lesson(LESSON, variant, "cpu", "small", **kw)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it has exited and only waits to be reaped
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_good_run_streams_events_and_returns_a_result():
    events = []
    res = SubprocessRunner().run(request("baseline"), on_event=events.append)
    kinds = [e["type"] for e in events]
    assert res.status == "ok", res.error
    assert kinds[0] == "started" and kinds[-1] == "result"
    assert [e["name"] for e in events if e["type"] == "phase"] == ["alloc", "double"]
    assert res.check("vector").measured_bytes == res.check("vector").expected_bytes == 4000
    assert res.metrics["sum"] == 2000.0
    assert res.step_time_s is not None and res.step_time_s > 0


def test_a_crash_reports_exit_code_and_stderr_tail():
    res = SubprocessRunner().run(request("crash"))
    assert res.status == "error"
    assert "exited with code 7" in res.error
    assert "about to crash on purpose" in res.error
    assert "\n" not in res.error  # one line for the UI; the full tail is in notes


def test_an_experiment_exception_is_an_error_result_not_a_crash():
    res = SubprocessRunner().run(request("raises"))
    assert res.status == "error"
    assert res.error == "ValueError: this experiment fails on purpose"
    assert res.phase("alloc") is not None  # what ran before the failure is kept


def test_out_of_memory_is_a_result_with_the_timeline_up_to_it():
    res = SubprocessRunner().run(request("oom", gpu_memory=20_000))
    assert res.status == "oom"
    assert "CUDA out of memory. Tried to allocate" in res.error
    assert res.peak.bytes <= 20_000
    assert res.peak.bytes >= 16_000  # it got as far as the capacity allowed
    assert res.timeline.events >= 4


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_timeout_and_cancel_kill_the_whole_process_group(tmp_path, how):
    pidfile = tmp_path / "pids"
    runner = SubprocessRunner(extra_env={"MEMLAB_TEST_PIDFILE": str(pidfile)})
    cancel = threading.Event()
    if how == "cancel":
        def cancel_when_running(msg):
            if msg.get("type") == "phase":
                cancel.set()
        req, on_event = request("hang", timeout_s=60), cancel_when_running
    else:
        # generous: under load, importing torch in the worker alone can take several seconds
        req, on_event = request("hang", timeout_s=20), None
    res = runner.run(req, on_event=on_event, cancel=cancel)
    assert res.status == ("cancelled" if how == "cancel" else "timeout")
    worker, grandchild = map(int, pidfile.read_text().split())
    deadline = time.monotonic() + 2.0  # killed within 2 s
    while (alive(worker) or alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker) and not alive(grandchild)


def test_a_bad_request_is_an_error_result():
    res = SubprocessRunner().run(request("no_such_variant"))
    assert res.status == "error" and "no_such_variant" in res.error
