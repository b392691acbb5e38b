"""Step times a reviewer would accept: the untracked pass, warm-up left out, one synchronize per
step, at least `TIMED_STEPS` timed steps, their spread recorded.

An experiment's phases carry their step in their name ("forward 3", "backward 3.1", "step 3":
lab/workloads/phases.py), and phases marked `setup=True` (building the model, making a batch)
are not part of a step. `StepClock` synchronizes where a step begins and where setup work
interrupts it, never inside a step, so the GPU's queue runs as it would in a training loop; a
step's time is the sum of its stretches between those points.

Step 0 is left out (fresh cudaMallocs, the first optimizer state, kernels loaded). So is the
last step when nothing but the experiment's end closes it: its stretch runs on to the end of the
function, so whatever the experiment does after its loop is in it (lesson 19 measures GPU busy %
for ~3 s there, Lightning tears its Trainer down, lesson 04 dumps a snapshot: last steps of 3-4 s,
1.7 s and 0.9 s against 0.03-0.5 s for the others, in the H200 and H100 recordings of 2026-12).
A step the next step's start or a setup phase closes ends at a synchronize of its own. When the
experiment's own steps give fewer than `TIMED_STEPS` timed ones and it takes a `steps`
parameter, a second untracked pass runs `warmup + TIMED_STEPS + 1` steps for the times (the first
pass's metrics stay: some depend on the number of steps). An experiment with fewer
step-numbered phases gives fewer timed steps, and its result's `timing` says how many.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable

from .result import Timing

TIMED_STEPS = 5
WARMUP_STEPS = 1
METHOD = ("untracked pass; step 0 left out as warm-up; one synchronize where a step begins or "
          "setup work interrupts it")
LAST_LEFT_OUT = "; the last step, which ran on to the experiment's end, left out"
# an experiment of one step has no warm-up to leave out: its one time includes it
ONE_STEP = ("untracked pass; a single step, its warm-up included; one synchronize where it begins "
            "or setup work interrupts it")
_STEP = re.compile(r"\s(\d+)(?:\.\d+)?$")


def step_of(phase: str) -> int:
    """'forward 3' -> 3, 'backward 2.1' -> 2 (micro-batch 1 of step 2), 'forward' -> 0."""
    m = _STEP.search(phase)
    return int(m.group(1)) if m else 0


def timed_params(params: dict[str, Any]) -> dict[str, Any]:
    """The parameters of the timed pass: enough steps for warm-up + TIMED_STEPS timed ones."""
    out = dict(params)
    if isinstance(out.get("steps"), int):
        out["steps"] = max(out["steps"], WARMUP_STEPS + TIMED_STEPS + 1)  # + the open-ended last
    return out


class StepClock:
    """Told of every phase of the timed pass; synchronizes only at step boundaries."""

    def __init__(self, sync: Callable[[], None], now: Callable[[], float] = time.perf_counter):
        self.sync, self.now = sync, now
        self.totals: dict[int, float] = {}  # step -> seconds
        self._running: tuple[int, float] | None = None  # (step, since)
        self._open_ended: int | None = None  # the step `stop` closed: it holds what ran after it

    def phase_start(self, name: str, setup: bool) -> None:
        if setup:
            self._close()
            return
        step = step_of(name)
        if self._running is not None and self._running[0] == step:
            return  # the same step goes on: no synchronize inside it
        self.sync()  # what ran before (the last step, setup work) is done: the step starts now
        self._close(synced=True)
        self._running = (step, self.now())

    def phase_end(self, name: str, setup: bool) -> None:
        """Nothing: the next step's start, a setup phase or `stop` closes the stretch."""

    def stop(self) -> None:
        """The experiment returned: the step still running ends here, with everything the
        experiment did after that step's last phase in it."""
        if self._running is not None:
            self._open_ended = self._running[0]
        self._close()

    def _close(self, synced: bool = False) -> None:
        if self._running is None:
            return
        if not synced:
            self.sync()
        step, since = self._running
        self.totals[step] = self.totals.get(step, 0.0) + self.now() - since
        self._running = None

    def timing(self) -> Timing | None:
        """The timed steps (warm-up left out); None when no step ran."""
        if not self.totals:
            return None
        steps = sorted(self.totals)
        warm = [s for s in steps if s < WARMUP_STEPS]
        after_warmup = [s for s in steps if s >= WARMUP_STEPS]
        closed = [s for s in after_warmup if s != self._open_ended]
        if not after_warmup:  # a single-step experiment: its one step, said by warmup_steps = 0
            return Timing(steps_s=[self.totals[s] for s in steps], warmup_steps=0, method=ONE_STEP)
        if not closed:  # one step after the warm-up: its time, however it ended
            return Timing(steps_s=[self.totals[s] for s in after_warmup], warmup_steps=len(warm),
                          method=METHOD)
        left_out = LAST_LEFT_OUT if len(closed) < len(after_warmup) else ""
        return Timing(steps_s=[self.totals[s] for s in closed], warmup_steps=len(warm),
                      method=METHOD + left_out)


__all__ = ["METHOD", "ONE_STEP", "StepClock", "TIMED_STEPS", "WARMUP_STEPS", "step_of", "timed_params"]
