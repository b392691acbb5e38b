"""`ReplayRunner`: plays recorded worker output back through the `Runner` protocol.

For deterministic tests and demos: no process, no torch. A recording is the worker's stdout
(JSON lines, see `protocol.py`) saved to a file; `tests/fixtures/record.py` makes them. A final
line `{"type": "_exit", "code": N, "stderr": [...]}` is replay metadata (how the process ended)
and is never passed to `on_event`. The lines go through the same reader as a live worker's
(`stream.WorkerStream`), so a recording without a `result` line becomes an `error` result
exactly as a worker that died does.

Which file answers a request: `overrides[variant]` when given, else
`<lesson-id>/<variant>.<mode>-<scale>.jsonl` under `root`.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from lab.measure.result import RunResult

from .client import OnEvent
from .protocol import RunRequest
from .stream import WorkerStream


class ReplayRunner:
    def __init__(self, root: Path | str, overrides: dict[str, str] | None = None,
                 delay_s: float = 0.0, hold: bool = False, hold_timeout_s: float = 10.0):
        """
        root: folder of recordings. overrides: variant -> file (relative to root).
        delay_s: pause between lines, to look like a live run.
        hold: stop before the result line until `cancel` is set (or hold_timeout_s passes),
              so a test can cancel a run that is certainly still in flight.
        """
        self.root = Path(root)
        self.overrides = dict(overrides or {})
        self.delay_s = delay_s
        self.hold = hold
        self.hold_timeout_s = hold_timeout_s
        self.requests: list[RunRequest] = []  # what was asked, in order (tests assert on it)
        self.holding = threading.Event()  # set while a held run waits for cancel

    def path_for(self, req: RunRequest) -> Path:
        if req.variant in self.overrides:
            return self.root / self.overrides[req.variant]
        return self.root / req.lesson / f"{req.variant}.{req.mode}-{req.scale}.jsonl"

    def run(self, req: RunRequest, on_event: OnEvent | None = None,
            cancel: threading.Event | None = None) -> RunResult:
        self.requests.append(req)
        on_event = on_event or (lambda msg: None)
        cancel = cancel or threading.Event()
        stream = WorkerStream(req)
        try:
            lines = self.path_for(req).read_text(encoding="utf-8").splitlines()
        except OSError as e:
            return stream.failed("error", f"no recording for this run: {e}")

        exit_info: dict = {}
        for line in lines:
            if not line.strip():
                continue
            msg = json.loads(line)
            if msg.get("type") == "_exit":
                exit_info = msg
                continue
            if msg.get("type") == "result" and self.hold:
                self.holding.set()
                cancel.wait(self.hold_timeout_s)
                self.holding.clear()
            if cancel.is_set():
                return stream.failed("cancelled", "cancelled by the user")
            if self.delay_s:
                time.sleep(self.delay_s)
            passed = stream.feed(msg)
            if passed is not None:
                on_event(passed)
            if stream.finished:
                break
        return stream.outcome(exit_info.get("code", 1 if not stream.finished else 0),
                              exit_info.get("stderr", []))
