"""The suite's own guards (issue 33): the per-test budget of the quick tier (tests/budget.py)
and waits for a child process that notice its death (tests/children.py)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from .. import budget
from ..children import wait_ready


def item(slow: bool = False, check: str = "on"):
    return SimpleNamespace(nodeid="tests/unit/test_x.py::test_y",
                           get_closest_marker=lambda name: object() if slow and name == "slow"
                           else None,
                           config=SimpleNamespace(getoption=lambda name: check))


def test_a_quick_test_over_the_cpu_limit_fails_naming_itself_and_its_time():
    why = budget.over_budget(item(), wall=3.0, cpu=budget.CPU_LIMIT_S + 0.5)
    assert why.startswith("tests/unit/test_x.py::test_y took")
    assert f"{budget.CPU_LIMIT_S + 0.5:.1f} CPU-s" in why and "@pytest.mark.slow" in why


def test_a_long_wait_is_over_the_wall_limit_even_without_cpu():
    why = budget.over_budget(item(), wall=budget.WALL_LIMIT_S + 1, cpu=0.2)
    assert "of wall time" in why and "CPU-s" not in why


def test_a_loaded_box_gets_a_wall_limit_in_proportion():
    wall = budget.WALL_LIMIT_S * 3
    assert budget.over_budget(item(), wall=wall, cpu=1.0, load=4.0) is None
    assert "x 2.0 for the load" in budget.over_budget(item(), wall=wall, cpu=1.0, load=2.0)
    assert budget.load_factor() >= 1.0


def test_within_budget_slow_tests_and_a_switched_off_check_pass():
    assert budget.over_budget(item(), wall=1.0, cpu=1.0) is None
    assert budget.over_budget(item(slow=True), wall=1e4, cpu=1e4) is None
    assert budget.over_budget(item(check="off"), wall=1e4, cpu=1e4) is None


def test_cpu_seconds_count_a_waited_for_child():
    before = budget.cpu_seconds()
    subprocess.run([sys.executable, "-c", "sum(range(3_000_000))"], check=True)
    assert budget.cpu_seconds() - before > 0.02


def test_a_child_that_dies_is_noticed_at_once_with_its_stderr(tmp_path):
    log = tmp_path / "err"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c",
                                 "import sys; sys.stderr.write('ImportError: no torch'); "
                                 "sys.exit(3)"], stderr=err)
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_ready(threading.Event(), lambda: proc.poll() is None, 300, "the zygote", stderr=log)
    assert time.monotonic() - started < 30  # not the 300 s timeout
    assert "the zygote died before it was ready" in str(failed.value)
    assert "ImportError: no torch" in str(failed.value)


def test_a_ready_child_returns_at_once():
    ready = threading.Event()
    ready.set()
    wait_ready(ready, lambda: True, 300, "a worker")
