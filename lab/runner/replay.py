"""`ReplayRunner`: a recording played back through the `Runner` protocol — the ONE runner for
everything the lab plays back instead of running.

A recording is a worker's output, as JSON lines, and it goes through the same reader as a live
worker's (`stream.WorkerStream`): a recording without a `result` line becomes an `error` result
exactly as a worker that died does. Two kinds, one path:

- `ReplayRunner(root)`: a worker's stdout saved to a file (`tests/fixtures/record.py` makes
  them), for deterministic tests and demos: no process, no torch. Which file answers a request:
  `overrides[variant]` when given, else `<lesson-id>/<variant>.<mode>-<scale>.jsonl` under
  `root`. A final line `{"type": "_exit", "code": N, "stderr": [...]}` says how the process
  ended and is never passed to `on_event`.
- `ReplayRunner.of_results(root, seconds)`: a recorded `RunResult` — the H200 runs in
  assets/reference (`<lesson-id>/<variant>.json`), the run an instructor pushed to a workshop —
  whose lines are made from it (`result_lines`: started, its phases and its timeline in
  FRAMES samples, the result), so the app's timeline grows as in a live run; a variant plays
  for `seconds` (0.6 s: a lesson plays back in a few seconds; tests pass 0).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable

from lab.measure.result import RunResult

from .client import OnEvent
from .protocol import RunRequest
from .stream import WorkerStream

FRAMES = 24  # samples a recorded result is played back in


def result_lines(result: RunResult, lesson_id: str, frames: int = FRAMES) -> list[dict]:
    """The lines a worker would have written for `result`: started, each phase as the timeline
    reaches it, `frames` samples of the timeline, then the result itself."""
    tl = result.timeline
    lines: list[dict] = [{"type": "started", "pid": 0, "lesson": lesson_id,
                          "variant": result.variant, "mode": result.mode, "scale": result.scale,
                          "device": result.device.name, "recorded": True}]
    xs = tl.index or list(range(len(tl.live)))
    starts = list(tl.phase_starts)
    n, shown, phase = len(xs), 0, None
    for frame in range(1, frames + 1):
        upto = n * frame // frames
        for i in range(shown, upto):
            while starts and starts[0][1] <= xs[i]:
                phase = starts.pop(0)[0]
                lines.append({"type": "phase", "name": phase, "live_bytes": tl.live[i]})
        if upto > shown:
            i = upto - 1
            lines.append({"type": "sample", "t": tl.t[i] if i < len(tl.t) else 0.0,
                          "live_bytes": tl.live[i], "phase": phase, "events": xs[i]})
        shown = upto
    lines.append({"type": "result", "result": result.to_dict()})
    return lines


class ReplayRunner:
    def __init__(self, root: Path | str, overrides: dict[str, str] | None = None,
                 delay_s: float = 0.0, hold: bool = False, hold_timeout_s: float = 10.0,
                 lines: Callable[[RunRequest], list[dict]] | None = None):
        """
        root: folder of recordings. overrides: variant -> file (relative to root).
        delay_s: pause between lines, to look like a live run.
        hold: stop before the result line until `cancel` is set (or hold_timeout_s passes),
              so a test can cancel a run that is certainly still in flight.
        lines: where a request's lines come from (default: its JSON-lines file under root).
        """
        self.root = Path(root) if root is not None else None
        self.overrides = dict(overrides or {})
        self.delay_s = delay_s
        self.hold = hold
        self.hold_timeout_s = hold_timeout_s
        self.lines = lines or self.file_lines
        self.requests: list[RunRequest] = []  # what was asked, in order (tests assert on it)
        self.holding = threading.Event()  # set while a held run waits for cancel

    @classmethod
    def of_results(cls, root: Path | str | None = None, seconds: float = 0.6) -> ReplayRunner:
        """Recorded results played back (None: the install's H200 recordings)."""
        from lab.course.reference import load_reference

        def lines(req: RunRequest) -> list[dict]:
            result = load_reference(req.lesson, root).get(req.variant)
            if result is None:
                raise LookupError(f"no H200 recording of {req.variant!r} in this install")
            return result_lines(result, req.lesson)

        return cls(root, delay_s=seconds / FRAMES, lines=lines)

    def path_for(self, req: RunRequest) -> Path:
        if req.variant in self.overrides:
            return self.root / self.overrides[req.variant]
        return self.root / req.lesson / f"{req.variant}.{req.mode}-{req.scale}.jsonl"

    def file_lines(self, req: RunRequest) -> list[dict]:
        text = self.path_for(req).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        self.requests.append(req)
        on_event = on_event or (lambda msg: None)
        cancel = cancel or threading.Event()
        stream = WorkerStream(req)
        try:
            lines = self.lines(req)
        except OSError as e:
            return stream.failed("error", f"no recording for this run: {e}")
        except LookupError as e:
            return stream.failed("error", str(e).strip("'\""))

        exit_info: dict = {}
        for msg in lines:
            if msg.get("type") == "_exit":
                exit_info = msg
                continue
            if msg.get("type") == "result" and self.hold:
                self.holding.set()
                cancel.wait(self.hold_timeout_s)
                self.holding.clear()
            if cancel.wait(self.delay_s) if self.delay_s else cancel.is_set():
                return stream.failed("cancelled", "cancelled by the user")
            passed = stream.feed(msg)
            if passed is not None:
                on_event(passed)
            if stream.finished:
                break
        return stream.outcome(exit_info.get("code", 1 if not stream.finished else 0),
                              exit_info.get("stderr", []))


__all__ = ["FRAMES", "ReplayRunner", "result_lines"]
