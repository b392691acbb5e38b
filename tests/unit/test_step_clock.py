"""StepClock: what a timed step holds (lab.measure.timing), on a clock the test moves by hand."""

from __future__ import annotations

import pytest

from lab.measure.timing import LAST_LEFT_OUT, METHOD, ONE_STEP, StepClock, timed_params


class Clock:
    def __init__(self):
        self.t, self.syncs = 0.0, 0

    def now(self) -> float:
        return self.t

    def sync(self) -> None:
        self.syncs += 1


def run_steps(clock: StepClock, t: Clock, n: int, step_s: float = 0.1) -> None:
    for i in range(n):
        for part in ("forward", "backward", "step"):
            clock.phase_start(f"{part} {i}", setup=False)
            t.t += step_s / 3
            clock.phase_end(f"{part} {i}", setup=False)


def test_work_after_the_loop_is_not_a_step():
    # given: six steps of 0.1 s, then 3 s of measuring after the loop (lesson 19's GPU busy %)
    t = Clock()
    clock = StepClock(t.sync, t.now)
    run_steps(clock, t, 6)
    t.t += 3.0
    clock.stop()
    timing = clock.timing()
    # then: step 0 (warm-up) and step 5 (which ran on to the end) are left out, and it says so
    assert timing.steps_s == pytest.approx([0.1] * 4)  # the hand-moved clock's 0.1 s steps
    assert timing.warmup_steps == 1
    assert timing.method == METHOD + LAST_LEFT_OUT


def test_a_last_step_a_setup_phase_closes_is_timed():
    # given: the measurement after the loop is a setup phase, which synchronizes and closes
    t = Clock()
    clock = StepClock(t.sync, t.now)
    run_steps(clock, t, 6)
    clock.phase_start("GPU busy %", setup=True)
    t.t += 3.0
    clock.phase_end("GPU busy %", setup=True)
    clock.stop()
    timing = clock.timing()
    assert timing.steps_s == pytest.approx([0.1] * 5)
    assert timing.method == METHOD


def test_one_step_after_the_warm_up_is_kept_however_it_ended():
    t = Clock()
    clock = StepClock(t.sync, t.now)
    run_steps(clock, t, 2)
    clock.stop()
    assert len(clock.timing().steps_s) == 1


def test_a_single_step_says_its_warm_up_is_in_it():
    # given: an experiment of one step (no `steps` parameter): nothing can be left out as
    # warm-up, and the method must not say step 0 was (lessons 05, 17, 23 said so until 2026-12)
    t = Clock()
    clock = StepClock(t.sync, t.now)
    run_steps(clock, t, 1)
    clock.stop()
    timing = clock.timing()
    assert (len(timing.steps_s), timing.warmup_steps, timing.method) == (1, 0, ONE_STEP)
    assert "left out" not in ONE_STEP


def test_the_timed_pass_runs_a_step_more_for_the_one_left_out():
    assert timed_params({"steps": 2})["steps"] == 7
    assert timed_params({"steps": 9})["steps"] == 9


def test_one_synchronize_per_step():
    t = Clock()
    clock = StepClock(t.sync, t.now)
    run_steps(clock, t, 6)
    clock.stop()
    assert t.syncs == 6 + 1  # each step's start, and the end
