"""`RecordingRunner`: the H200 recording of a lesson, played back like a live run.

On a machine without CUDA the lesson's main result is the run recorded on an NVIDIA H200
(`assets/reference/<lesson-id>/<variant>.json`). It goes through the same path a live run
takes — the `Runner` protocol's `run(request, on_event, cancel)` — so the screen sees the
worker's events (started, phases, samples: the timeline grows) and then the recorded
`RunResult` (categories, allocator numbers, step times). A variant plays for `seconds`
(default 0.6 s): a lesson plays back in a few seconds.

Headless (no Textual): the app injects it like any runner; tests use it with `seconds=0`.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lab.measure.result import RunResult
from lab.course.reference import load_reference
from lab.runner.client import OnEvent, failed_result
from lab.runner.protocol import RunRequest

FRAMES = 24  # samples streamed per variant


class RecordingRunner:
    def __init__(self, root: Path | str | None = None, seconds: float = 0.6):
        self.root = root
        self.seconds = seconds
        self.requests: list[RunRequest] = []

    def has(self, lesson_id: str) -> set[str]:
        """The variants recorded for a lesson."""
        return set(load_reference(lesson_id, self.root))

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        self.requests.append(req)
        on_event = on_event or (lambda msg: None)
        cancel = cancel or threading.Event()
        lesson_id = req.lesson
        result = load_reference(lesson_id, self.root).get(req.variant)
        if result is None:
            return failed_result(req, lesson_id, "error",
                                 f"no H200 recording of {req.variant!r} in this install")
        tl = result.timeline
        on_event({"type": "started", "pid": 0, "lesson": lesson_id, "variant": req.variant,
                  "mode": result.mode, "scale": result.scale, "device": result.device.name,
                  "recorded": True})
        xs = tl.index or list(range(len(tl.live)))
        starts = list(tl.phase_starts)
        n = len(xs)
        pause = self.seconds / FRAMES
        shown, phase = 0, None
        for frame in range(1, FRAMES + 1):
            if cancel.wait(pause) if pause else cancel.is_set():
                return failed_result(req, lesson_id, "cancelled", "cancelled by the user")
            upto = n * frame // FRAMES
            for i in range(shown, upto):
                while starts and starts[0][1] <= xs[i]:
                    phase = starts.pop(0)[0]
                    on_event({"type": "phase", "name": phase, "live_bytes": tl.live[i]})
            if upto > shown:
                i = upto - 1
                on_event({"type": "sample", "t": tl.t[i] if i < len(tl.t) else 0.0,
                          "live_bytes": tl.live[i], "phase": phase, "events": xs[i]})
            shown = upto
        return result


__all__ = ["RecordingRunner"]
