"""The one run loop (lab.runner.loop.run_all), with a fake runner: order, events, cancel."""

import threading

from lab.measure.result import RunResult
from lab.runner.loop import run_all
from lab.runner.protocol import RunRequest
from lab.runner.stream import device_for


class FakeRunner:
    """Each run waits for its own gate, so a test decides the order in which runs end."""

    def __init__(self, n: int, parallel: int = 1, fail: int | None = None):
        self.gates = [threading.Event() for _ in range(n)]
        self.parallel, self.fail = parallel, fail
        self.started: list[str] = []

    def run(self, req, on_event=None, cancel=None):
        i = int(req.variant[1:])
        self.started.append(req.variant)
        if i == self.fail:
            raise RuntimeError("the runner broke")
        if on_event:
            on_event({"type": "started", "variant": req.variant})
        while not self.gates[i].wait(0.01):
            if cancel is not None and cancel.is_set():
                return _result(req, "cancelled")
        return _result(req, "ok")


def _result(req, status):
    return RunResult(lesson="x", variant=req.variant, mode="cpu", scale="small",
                     device=device_for("cpu"), status=status)


def requests(n):
    return [RunRequest("x", f"v{i}") for i in range(n)]


def test_parallel_runs_come_back_in_request_order_whatever_order_they_end_in():
    runner = FakeRunner(3, parallel=3)
    landed, events = [], []
    for g in reversed(runner.gates):  # all free; the last may well finish first
        g.set()
    out = run_all(runner, requests(3), on_result=lambda i, r: landed.append((i, r.variant)),
                  on_event=lambda i, m: events.append((i, m["type"])), announce=True)
    assert [r.variant for r in out] == ["v0", "v1", "v2"]
    assert landed == [(0, "v0"), (1, "v1"), (2, "v2")]  # on_result in order too
    for i in range(3):
        mine = [kind for j, kind in events if j == i]
        assert mine == ["queued", "started"]


def test_on_result_waits_for_earlier_runs():
    runner = FakeRunner(2, parallel=2)
    landed = []
    t = threading.Thread(target=lambda: run_all(runner, requests(2),
                                                on_result=lambda i, r: landed.append(i)))
    t.start()
    runner.gates[1].set()  # the second ends first ...
    t.join(0.3)
    assert landed == []  # ... but is handed out only after the first
    runner.gates[0].set()
    t.join(5)
    assert landed == [0, 1]


def test_jobs_none_asks_the_runner_and_one_means_one_at_a_time():
    runner = FakeRunner(3, parallel=1)
    for g in runner.gates:
        g.set()
    assert len(run_all(runner, requests(3))) == 3
    assert runner.started == ["v0", "v1", "v2"]


def test_cancel_stops_new_runs_and_cancels_the_one_in_flight():
    runner = FakeRunner(3)
    cancel = threading.Event()

    def on_event(i, msg):
        if msg["type"] == "started" and i == 1:
            cancel.set()

    runner.gates[0].set()
    out = run_all(runner, requests(3), cancel=cancel, on_event=on_event)
    assert [(r.variant, r.status) for r in out] == [("v0", "ok"), ("v1", "cancelled")]
    assert runner.started == ["v0", "v1"]


def test_stop_callable_ends_the_loop_like_cancel():
    runner = FakeRunner(2)
    runner.gates[0].set()
    done = []
    out = run_all(runner, requests(2), stop=lambda: bool(done),
                  on_result=lambda i, r: done.append(i))
    assert [r.variant for r in out] == ["v0"]


def test_a_runner_that_raises_is_an_error_result():
    runner = FakeRunner(2, fail=0)
    runner.gates[1].set()
    out = run_all(runner, requests(2))
    assert out[0].status == "error" and out[0].error == "the runner failed: RuntimeError: the runner broke"
    assert out[1].status == "ok"


def test_runs_are_handed_over_in_request_order_even_when_many_are_in_flight(monkeypatch):
    import lab.runner.loop as loop

    monkeypatch.setattr(loop, "ORDER_WAIT_S", 10.0)  # a loaded machine must not reorder them
    runner = FakeRunner(6, parallel=6)  # "started" at once, like the service's first answer
    for g in runner.gates:
        g.set()
    run_all(runner, requests(6))
    assert runner.started == [f"v{i}" for i in range(6)]


def test_untimed_runs_go_side_by_side_one_per_core_and_timed_ones_alone():
    from lab.runner.loop import SIDE_BY_SIDE_MAX, side_by_side

    assert side_by_side("sim", cores=2) == 2
    assert side_by_side("sim", cores=1) == 1
    assert side_by_side("sim", cores=64) == SIDE_BY_SIDE_MAX
    assert side_by_side("cpu", cores=64) == 1 and side_by_side("cuda", cores=64) == 1
