"""The suite's time budget, per test (issue 33; in the spirit of torchtitan's
check_new_test_time_budget): a test of the quick tier (not marked `slow`) that takes more than
its share fails, naming itself and its time, so a slow test is marked slow on purpose, with a
reason, instead of slipping into the tier everyone runs.

Two limits, because a shared 2-core box can be many times slower than a quiet one (the quick
tier took 78 s quiet, 539 s at a load average of 5 and 1,100 s at 40 here) and the budget must
not make CI flaky:

  CPU_LIMIT_S   CPU seconds the test spent: this process's plus its children's that it waited
                for (a worker it spawned). Load stretches CPU time about two-fold where it
                stretches wall time ten-fold, so this is the tighter limit. The costliest quick
                test spent 5.9 CPU-s at a load of 11 to 46 (a TUI test over every lesson); 15
                leaves 2.5 times that, and no quick test passed it at a load of 40.
  WALL_LIMIT_S  wall seconds on an idle box, for what CPU time does not see (a test waiting on
                a child or a clock), scaled by the load: times max(1, load average / cores),
                read when the test ends. At a load of 11 on 2 cores a quick test of 6 CPU-s
                took 44 s; a quiet box runs the slowest in a few seconds.

Setup and call count together (a fixture's work is the test's). Tests marked slow
are not held to these limits: `@pytest.mark.slow  # why` (or `slow(reason="…")`). `--budget=off`
turns the check off (a debugger, a profiler); MEMLAB_TEST_TIMES=FILE appends every test's
times to FILE as JSON lines (bench/suite_time.py reads them).
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

CPU_LIMIT_S = 15.0
WALL_LIMIT_S = 60.0
TIMES_ENV = "MEMLAB_TEST_TIMES"
_START = pytest.StashKey[tuple]()


def cpu_seconds() -> float:
    """This process's CPU time and its waited-for children's."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def addoption(parser) -> None:
    parser.addoption("--budget", choices=("on", "off"), default="on",
                     help="fail a test not marked slow that passes the per-test time budget "
                          "(tests/budget.py)")


def start(item) -> None:
    item.stash[_START] = (time.perf_counter(), cpu_seconds())


def load_factor() -> float:
    """How many times busier than its cores the box is (1 when idle or unknown)."""
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0


def over_budget(item, wall: float, cpu: float, load: float = 1.0) -> str | None:
    """The failure message, or None (within budget, or marked slow, or the check is off)."""
    if item.config.getoption("--budget") == "off" or item.get_closest_marker("slow"):
        return None
    over = []
    if cpu > CPU_LIMIT_S:
        over.append(f"{cpu:.1f} CPU-s (limit {CPU_LIMIT_S:g})")
    if wall > WALL_LIMIT_S * load:
        over.append(f"{wall:.1f} s of wall time (limit {WALL_LIMIT_S:g} s"
                    + (f" x {load:.1f} for the load" if load > 1 else "") + ")")
    if not over:
        return None
    return (f"{item.nodeid} took {' and '.join(over)}: over the quick tier's per-test budget "
            "(tests/budget.py). Make it faster, or mark it `@pytest.mark.slow` with a comment "
            "saying why: the full suite runs it, the quick tier does not.")


def judge(item, report) -> None:
    """After the call: its setup and call against the budget (a failed test stays failed with
    its own message)."""
    began = item.stash.get(_START, None)
    if began is None:
        return
    wall, cpu = time.perf_counter() - began[0], cpu_seconds() - began[1]
    message = over_budget(item, wall, cpu, load_factor())
    if message and report.outcome == "passed":
        report.outcome = "failed"
        report.longrepr = message


def log(item) -> None:
    """After teardown: the whole test's times, to MEMLAB_TEST_TIMES when it is set."""
    began, path = item.stash.get(_START, None), os.environ.get(TIMES_ENV)
    if began is None or not path:
        return
    wall, cpu = time.perf_counter() - began[0], cpu_seconds() - began[1]
    with open(path, "a", encoding="utf-8") as f:  # one short line: appends do not interleave
        f.write(json.dumps({"test": item.nodeid, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                            "slow": item.get_closest_marker("slow") is not None}) + "\n")
