"""The runner service: started on demand, warm workers, queue, cancel, lock, idle exit.

Every service lives under the test's MEMLAB_HOME and is stopped by the fixture (and again by
the conftest's safety net): no daemon survives a test.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from lab.course.curriculum import load_lesson
from lab.runner import remote
from lab.runner.client import SubprocessRunner, default_runner
from lab.runner.paths import pid_path, socket_path
from lab.runner.protocol import RunRequest
from lab.runner.remote import ServiceRunner, ServiceUnavailable

from ..conftest import FIXTURES, ROOT
from .test_runner import alive

LESSON = load_lesson(FIXTURES / "lessons" / "90-misbehave")


def request(variant, mode="cpu", **kw):
    return RunRequest.for_lesson(LESSON, variant, mode, "small", **kw)


def service_pid() -> int:
    return json.loads(pid_path().read_text())["pid"]


@pytest.fixture
def service(monkeypatch):
    """The service path on (tests run direct by default), one spare worker: a 2-core machine."""
    monkeypatch.setenv("MEMLAB_RUNNER", "service")
    monkeypatch.setenv("MEMLAB_RUNNER_SPARES", "1")
    monkeypatch.setenv("MEMLAB_RUNNER_IDLE_S", "300")
    workers: list[int] = []
    yield workers
    pid = service_pid() if pid_path().exists() else None
    assert remote.stop_service() or pid is None
    deadline = time.monotonic() + 10
    while any(alive(p) for p in [pid or 0, *workers] if p) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (pid and alive(pid)), "the service survived its test"
    assert not any(alive(p) for p in workers), "a worker survived its test"


def test_unreachable_service_falls_back_to_a_direct_worker(monkeypatch):
    class Fallback:
        def run(self, req, on_event=None, cancel=None):
            return "ran directly"

    def unreachable(**kw):
        raise ServiceUnavailable("this system has no Unix domain sockets")

    monkeypatch.setattr(remote, "connect", unreachable)
    runner = ServiceRunner(fallback=Fallback())
    assert runner.run(request("baseline")) == "ran directly"
    assert runner.fallback_reason == "this system has no Unix domain sockets"


def test_the_service_side_never_imports_torch():
    # it must start in a blink and never touch CUDA: torch lives in the workers only
    code = ("import sys, lab.runner.daemon, lab.runner.remote, lab.runner.loop, lab.runner.gpus; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-500:]


def test_direct_when_asked(monkeypatch):
    monkeypatch.setenv("MEMLAB_RUNNER", "direct")
    assert isinstance(default_runner(), SubprocessRunner)


def test_a_long_runtime_dir_still_gets_a_socket(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLAB_HOME", str(tmp_path / ("deep" * 30)))
    assert len(os.fsencode(socket_path())) <= 100


@pytest.mark.slow
def test_a_run_goes_through_a_service_started_on_demand(service):
    runner = default_runner()
    assert isinstance(runner, ServiceRunner)
    events = []
    res = runner.run(request("baseline"), on_event=events.append)
    assert res.status == "ok", (res.error, runner.fallback_reason)
    assert res.metrics["sum"] == 2000.0
    kinds = [e["type"] for e in events]
    assert kinds.index("status") < kinds.index("started") < kinds.index("result")
    assert any(e.get("stage") == "starting" for e in events)
    worker = next(e["pid"] for e in events if e["type"] == "started")
    service.append(worker)
    assert worker != service_pid() and alive(service_pid())
    assert remote.ask("ping")["pid"] == service_pid()

    # Then the next run finds a warm worker waiting (imports done) and says so
    deadline = time.monotonic() + 120
    while remote.ask("state")["pool"]["ready"] < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    events.clear()
    res = runner.run(request("baseline"), on_event=events.append)
    assert res.status == "ok"
    assert any(e.get("text") == "worker ready" for e in events)
    service.append(next(e["pid"] for e in events if e["type"] == "started"))


@pytest.mark.slow
def test_cancel_while_waiting_in_the_queue_and_while_running(service, monkeypatch, tmp_path):
    pidfile = tmp_path / "pids"
    monkeypatch.setenv("MEMLAB_TEST_PIDFILE", str(pidfile))  # forwarded to the worker
    runner = default_runner()
    # Given a timed cpu run that holds every core (it hangs)
    first_cancel, out = threading.Event(), {}
    first = threading.Thread(target=lambda: out.setdefault("first", runner.run(
        request("hang", timeout_s=120), cancel=first_cancel)))
    first.start()
    deadline = time.monotonic() + 90
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    worker, grandchild = map(int, pidfile.read_text().split())
    service.extend([worker, grandchild])
    # When a second timed cpu run arrives, it waits in the queue, saying so
    second_cancel, said = threading.Event(), []
    second = threading.Thread(target=lambda: out.setdefault("second", runner.run(
        request("baseline"), cancel=second_cancel, on_event=said.append)))
    second.start()
    while not said and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.fullmatch(r"waiting for (\d+ CPU cores|a CPU core) — 1 running, next in line",
                        said[0]["text"]), said[0]
    # Then Esc while waiting takes it out of the queue
    second_cancel.set()
    second.join(10)
    assert out["second"].status == "cancelled"
    assert out["second"].error == "cancelled while waiting in the queue"
    # and cancelling the running one kills its whole process group
    first_cancel.set()
    first.join(10)
    assert out["first"].status == "cancelled"
    deadline = time.monotonic() + 2.0
    while (alive(worker) or alive(grandchild)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker) and not alive(grandchild)


@pytest.mark.slow
def test_one_service_per_user_a_second_one_leaves_at_once(service):
    remote.connect(start=True).close()
    first = service_pid()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "lab.runner.daemon"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert "another runner service holds" in proc.stderr
    assert service_pid() == first and alive(first)


@pytest.mark.slow
def test_the_service_goes_away_when_idle(monkeypatch):
    monkeypatch.setenv("MEMLAB_RUNNER", "service")
    monkeypatch.setenv("MEMLAB_RUNNER_SPARES", "0")
    monkeypatch.setenv("MEMLAB_RUNNER_IDLE_S", "1")
    # the pid from the service's own answer: after a 1 s idle it may be gone (pid file and all)
    # before a loaded machine gets round to reading the file
    pid = remote.ask("ping", start=True)["pid"]
    deadline = time.monotonic() + 30
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
    assert not socket_path().exists() and not pid_path().exists()


@pytest.mark.slow
def test_a_cuda_run_is_placed_on_a_gpu_of_the_service(service, monkeypatch):
    # Given a service told it has two 80 GB GPUs (this machine has none: the worker says so)
    monkeypatch.setenv("MEMLAB_RUNNER_GPUS", "80GB,80GB")
    runner, events = default_runner(), []
    res = runner.run(request("baseline", mode="cuda"), on_event=events.append)
    starting = [e["text"] for e in events if e.get("stage") == "starting"]
    assert starting[0] in ("worker ready on GPU 0", "starting a worker on GPU 0 (importing torch)")
    assert res.status == "error" and "needs a CUDA GPU" in res.error  # none here, truly
    too_many = runner.run(request("baseline", mode="cuda", ranks=3))
    assert too_many.error == "the run asks for 3 GPUs, one per rank; this machine has 2"


@pytest.mark.slow
def test_quitting_the_last_app_stops_the_service_an_app_started(service, monkeypatch):
    """`q` in the app: the service (and its zygote, ~350 MB) goes with the last app that uses
    it, when an app started it; while another app uses it, or a shell started it, it stays, and
    the terminal is told for whom and for how long."""
    from lab.runner.paths import clients_dir

    monkeypatch.setenv("MEMLAB_RUNNER_SPARES", "0")
    monkeypatch.setenv("MEMLAB_RUNNER_ZYGOTE", "0")
    first = ServiceRunner(fallback=SubprocessRunner())
    first.register()
    first.prestart()
    assert first.started_service
    pid = service_pid()
    # another app (a live process) uses it too: it stays, and says so
    other = clients_dir() / str(os.getppid())
    other.touch()
    note = first.release()
    assert alive(pid) and note is not None
    assert f"app {os.getppid()}" in note and "stops by itself after 5 min without a run" in note
    # that app quits last: the service an app started goes with it
    other.unlink()
    assert ServiceRunner(fallback=SubprocessRunner()).release() is None
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)
    # a service a shell started (memlab run) is not an app's to stop: it stays, said so
    remote.connect(start=True).close()
    note = ServiceRunner(fallback=SubprocessRunner()).release()
    assert alive(service_pid()) and "stays for the shell that started it" in note
