"""The ONE reader of worker output: JSON lines in, a `RunResult` out, whatever happened.

Used for a live worker (`group.drive`, behind both the direct runner and the runner service)
and for a recording (`ReplayRunner`), so a crashed, failed or cancelled run reads the same
wherever it came from. A worker that exits without a result becomes status "error" with its exit
code and the tail of its stderr; what it streamed before (samples) becomes the timeline.
"""

from __future__ import annotations

import json
from typing import Iterable

from lab.measure.result import DeviceInfo, RunResult, Timeline
from lab.measure.schema import SchemaError

from .protocol import RunRequest, decode_event

# internal lines: how a process ended (recordings) and a warm worker's readiness; never
# passed on to `on_event`
PRIVATE = ("_exit", "ready")


def device_for(mode: str) -> DeviceInfo:
    return DeviceInfo({"cuda": "CUDA GPU", "cpu": "CPU", "sim": "simulated (FakeTensorMode)"}
                      .get(mode, mode), mode)


def failed_result(req: RunRequest, lesson_id: str, status: str, error: str,
                  samples: list[dict] | None = None) -> RunResult:
    res = RunResult(lesson=lesson_id, variant=req.variant, mode=req.mode, scale=req.scale,
                    device=device_for(req.mode), status=status, error=error)
    if samples:  # what the live stream showed before the end: better than nothing
        res.timeline = Timeline(index=list(range(len(samples))), t=[s["t"] for s in samples],
                                live=[s["live_bytes"] for s in samples], events=len(samples))
    return res


class WorkerStream:
    """Feed it one worker's lines (or parsed messages); ask it for the result at the end."""

    def __init__(self, req: RunRequest):
        self.req = req
        self.lesson_id = req.lesson  # until the worker says otherwise
        self.samples: list[dict] = []
        self.result: RunResult | None = None
        self.error: str | None = None
        self.junk: list[str] = []  # non-JSON lines on the protocol stream (kept with stderr)

    def feed_line(self, line: str) -> dict | None:
        """Parse and take in one line; returns the message to pass on, or None."""
        if not line.strip():
            return None
        try:
            msg = json.loads(line)
            if not (isinstance(msg, dict) and msg.get("type") in PRIVATE):
                decode_event(msg)
        except (json.JSONDecodeError, SchemaError) as e:
            # not an event (a library printing to the protocol stream) or a malformed one
            self.junk.append(line.rstrip() + ("" if isinstance(e, json.JSONDecodeError)
                                              else f"  ({e})"))
            return None
        return self.feed(msg)

    def feed(self, msg: dict) -> dict | None:
        kind = msg.get("type")
        if kind in PRIVATE:
            return None
        if kind == "started":
            self.lesson_id = msg.get("lesson", self.lesson_id)
        elif kind == "sample":
            self.samples.append(msg)
        elif kind == "result":
            try:
                self.result = RunResult.from_dict(msg["result"])
            except SchemaError as e:  # a worker of another version, or a broken one
                self.error = f"the worker's result does not fit the schema: {e}"
        elif kind == "error":
            self.error = msg.get("error", "unknown error")
        return msg

    @property
    def finished(self) -> bool:
        """A result or an error line came: nothing more will be said that matters."""
        return self.result is not None or self.error is not None

    def failed(self, status: str, error: str) -> RunResult:
        """Stopped from outside (cancel, timeout, another rank failed): what streamed so far."""
        return failed_result(self.req, self.lesson_id, status, error, self.samples)

    def outcome(self, code: int | None, stderr: Iterable[str] = ()) -> RunResult:
        """The run's result once the worker has exited with `code`."""
        if self.result is not None:
            return self.result
        tail = [*self.junk, *stderr]
        error = self.error
        if error is None:
            last = " | ".join(tail[-3:]) or "no output"
            error = f"the worker exited with code {code} before reporting a result: {last}"
        res = self.failed("error", error)
        res.notes.append("stderr tail:\n" + "\n".join(tail))
        return res
