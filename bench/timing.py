"""Where a run's time goes, seen from the client: event timestamps around `runner.run`.

    t = Timed(runner).run(request)   # t.result, t.wall_s, t.phases_s(), t.overhead_s

Stages (seconds, from the moment the request is handed to the runner):
  queued    until the service says the run starts ("starting"), i.e. time in the GPU/core queue
  start     until the worker says "started" (a cold worker imports torch here; a warm one not)
  tracked   until "timing pass" (or the result): the tracked pass, report building included
  timing    the untracked timing pass (cpu/cuda), until the result
  tail      after the result line until `run` returns (worker exit, result transfer)
overhead = wall - the work the worker reports (RunResult.wall_s).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Timed:
    runner: object
    result: object = None
    wall_s: float = 0.0
    marks: dict = field(default_factory=dict)

    def run(self, req, cancel=None, on_event=None):
        t0 = time.perf_counter()

        def ev(msg):
            now = time.perf_counter() - t0
            kind = msg.get("type")
            key = msg.get("stage") if kind == "status" else kind
            self.marks.setdefault(key, now)
            if on_event:
                on_event(msg)

        self.result = self.runner.run(req, on_event=ev, cancel=cancel)
        self.wall_s = time.perf_counter() - t0
        return self

    @property
    def overhead_s(self) -> float:
        return self.wall_s - (self.result.wall_s or 0.0)

    def stages(self) -> dict[str, float]:
        m = self.marks
        starting = m.get("starting", 0.0)
        started = m.get("started", starting)
        timing = m.get("timing", m.get("result", self.wall_s))
        result = m.get("result", self.wall_s)
        return {"queued": starting, "start": started - starting, "tracked": timing - started,
                "timing": result - timing, "tail": self.wall_s - result}
