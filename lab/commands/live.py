"""Progress on stderr for `memlab run` and `memlab compare`: short, and quiet when piped.

On a terminal each variant gets ONE line, rewritten in place as its phases go by
("▶ 03 baseline · forward 2 · 1.23 GB live · 4.1 s") and replaced by its outcome when it ends.
When stderr is not a terminal (a log, CI, a pipe) nothing is printed per phase: one line per
variant when it ends. With several variants at once (--jobs) lines cannot be rewritten, so each
variant gets its outcome line only.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from typing import TextIO

from lab.report import format_bytes, peak_text, row_of, seconds

REDRAW_S = 0.1  # at most ten rewrites a second: the worker samples ~10/s


class Live:
    def __init__(self, stream: TextIO | None = None, tty: bool | None = None,
                 in_place: bool = True, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.in_place = self.tty and in_place
        self.enabled = enabled
        self._lock = threading.Lock()
        self._open = False  # a rewritable line is on screen
        self._started: dict[str, float] = {}
        self._last_draw = 0.0
        self._phase: dict[str, str] = {}

    def _write(self, text: str, newline: bool) -> None:
        if self.in_place:
            width = shutil.get_terminal_size((100, 24)).columns - 1
            text = text if len(text) <= width else text[: max(0, width - 1)] + "…"
            self.stream.write("\r\x1b[K" + text + ("\n" if newline else ""))
            self._open = not newline
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, label: str) -> None:
        """A variant begins (again calling it for the same label changes nothing)."""
        if label in self._started:
            return
        self._started[label] = time.perf_counter()
        if self.enabled and self.in_place:
            with self._lock:
                self._write(f"▶ {label} · starting a worker …", newline=False)

    def event(self, label: str, msg: dict) -> None:
        """A worker message (phase / sample): rewrite the line, at most every REDRAW_S."""
        if not (self.enabled and self.in_place) or msg.get("type") not in ("phase", "sample"):
            return
        if msg.get("type") == "phase":
            self._phase[label] = msg.get("name", "")
        elif msg.get("phase"):
            self._phase[label] = msg["phase"]
        now = time.perf_counter()
        if msg.get("type") == "sample" and now - self._last_draw < REDRAW_S:
            return
        self._last_draw = now
        parts = [f"▶ {label}"]
        if self._phase.get(label):
            parts.append(self._phase[label])
        if msg.get("live_bytes") is not None:
            parts.append(f"{format_bytes(msg['live_bytes'])} live")
        parts.append(seconds(now - self._started.get(label, now)))
        with self._lock:
            self._write(" · ".join(parts), newline=False)

    def done(self, label: str, result) -> None:
        if not self.enabled:
            return
        took = time.perf_counter() - self._started.pop(label, time.perf_counter())
        mark = "✓" if result.status == "ok" else "✗"
        text = peak_text(row_of(result))
        outcome = f"peak {text}" if result.status == "ok" else text
        with self._lock:
            self._write(f"{mark} {label}: {outcome} · {seconds(took)}", newline=True)

    def note(self, text: str) -> None:
        """A line of its own (a skipped lesson, where results were saved)."""
        if not self.enabled:
            return
        with self._lock:
            self._write(text, newline=True)  # on a terminal this replaces an open line

    def close(self) -> None:
        """Leave the terminal on a fresh line (after Ctrl+C, for instance)."""
        with self._lock:
            if self._open:
                self.stream.write("\n")
                self.stream.flush()
                self._open = False


__all__ = ["Live"]
