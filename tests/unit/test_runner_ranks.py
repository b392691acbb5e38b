"""N ranks per run (torch.distributed, gloo on CPU): started like torchrun, tracked per rank,
torn down together. Uses tests/fixtures/lessons/91-ranks."""

import os
import signal
import threading
import time

import pytest

from lab.course.curriculum import load_lesson
from lab.runner.client import SubprocessRunner
from lab.runner.protocol import RunRequest

from ..conftest import FIXTURES
from .test_runner import alive

LESSON = load_lesson(FIXTURES / "lessons" / "91-ranks")


def request(variant, **kw):
    return RunRequest.for_lesson(LESSON, variant, "cpu", "small", ranks=2, **kw)


def test_sim_does_not_start_one_worker_per_rank():
    res = SubprocessRunner().run(RunRequest(LESSON.id, "baseline", mode="sim", ranks=2))
    assert res.status == "error" and "sim does not start one worker per rank" in res.error


@pytest.mark.slow
def test_two_ranks_all_reduce_and_each_rank_is_tracked():
    events = []
    res = SubprocessRunner().run(request("baseline", timing=False), on_event=events.append)
    assert res.status == "ok", res.error
    assert [r.metrics["rank"] for r in res.ranks] == [0.0, 1.0]
    assert all(r.metrics["world_size"] == 2.0 and r.metrics["first"] == 3.0 for r in res.ranks)
    assert res.metrics == res.ranks[0].metrics  # rank 0's numbers on top
    for r in res.ranks:  # its own phases and categories
        assert [p.name for p in r.phases] == ["tensor", "all_reduce"]
        assert r.peak.bytes == 4000
    assert {e.get("rank") for e in events if e["type"] == "started"} == {0, 1}


@pytest.mark.slow
def test_ddp_over_two_ranks_ends_with_equal_weights():
    res = SubprocessRunner().run(request("ddp", timing=False))
    assert res.status == "ok", res.error
    a, b = (r.metrics["weight_sum"] for r in res.ranks)
    assert a == b  # DDP averaged the gradients: both ranks took the same step
    # every rank held gradients (where the peak falls depends on when gloo's reducer threads
    # allocate, which varies under load: ask the timeline, not the peak's breakdown)
    assert all(max(r.timeline.by_category.get("gradients", [0])) > 0 for r in res.ranks)


@pytest.mark.slow
def test_killing_one_rank_ends_the_group_and_names_the_rank(tmp_path):
    # Given two ranks looping on all_reduce, each writing its pid
    pidfile = tmp_path / "pid"
    runner = SubprocessRunner(extra_env={"MEMLAB_TEST_PIDFILE": str(pidfile)})
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("res", runner.run(request("hang", timeout_s=120))))
    t.start()
    deadline = time.monotonic() + 90
    paths = [tmp_path / "pid.0", tmp_path / "pid.1"]
    while not all(p.exists() and p.read_text() for p in paths) and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = [int(p.read_text()) for p in paths]
    # When rank 1 dies
    os.kill(pids[1], signal.SIGKILL)
    killed = time.monotonic()
    t.join(5.0)
    # Then the whole group is gone within 5 s, and the result says which rank failed
    while any(alive(p) for p in pids) and time.monotonic() - killed < 5.0:
        time.sleep(0.05)
    assert not t.is_alive(), "the run did not end within 5 s of a rank's death"
    assert not any(alive(p) for p in pids)
    res = out["res"]
    assert res.status == "error"
    assert res.error.startswith("rank 1 of 2: the worker exited with code -9"), res.error
    # rank 0 either saw its collective fail (its own error) or was stopped with the group
    assert res.ranks[1].status == "error" and res.ranks[0].status in ("error", "cancelled")
