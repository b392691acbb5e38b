"""The lesson's status line: what runs now (variant, phase, live bytes, seconds) and a sparkline.

It repaints without a layout pass (it changes ~10×/s during a run). While a run is in flight
a one-second timer keeps the elapsed time moving even when the worker is silent — a CPU
matmul at seed scale can take minutes in one phase, and a frozen line looks like a hang.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import Sparkline

from lab.report.units import elapsed

from .fit import Fit


def styled(words, variant_color: str = "") -> Text:
    """(text, style) pieces (lab/tui/lesson_words.py) as Rich Text; "variant": its colour."""
    return Text.assemble(*((t, f"bold {variant_color}" if s == "variant" else s)
                           for t, s in words))


class StatusText(Widget):
    """One line of text. `say()` repaints without a layout pass."""

    DEFAULT_CSS = "StatusText { width: 1fr; height: 1; }"

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.text: Text | str | Fit = ""

    def render(self) -> Text | str | Fit:
        return self.text

    @property
    def content(self):  # the same accessor as Static, for tests
        return self.text

    def say(self, text: Text | str | Fit) -> None:
        self.text = text
        self.refresh()


class RunStatus(Horizontal):
    DEFAULT_CSS = """
    RunStatus { height: 1; background: $panel; padding: 0 1; }
    RunStatus > Sparkline { width: 24; margin-left: 1; display: none; }
    RunStatus.-running > Sparkline { display: block; }
    """

    clock = staticmethod(time.monotonic)  # tests freeze it

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._line: tuple[Text, ...] | None = None  # the running line's forms, without the time
        self._started: float | None = None
        self._timer = None

    def compose(self) -> ComposeResult:
        yield StatusText(id="status-text")
        yield Sparkline([], id="status-spark")

    def on_mount(self) -> None:
        self._timer = self.set_interval(1.0, self._tick, pause=True)

    def say(self, text: Text | str) -> None:
        """A message that is not about a run in flight (idle, done, cancelling)."""
        self._line = None
        self.query_one("#status-text", StatusText).say(text)

    def start(self, line: Text | None = None) -> None:
        """A run starts (or its next variant is queued): the clock from 0, the sparkline on."""
        if line is not None:
            self.say(line)
        self._started = self.clock()
        self.add_class("-running")
        self.query_one("#status-spark", Sparkline).data = []
        if self._timer is not None:
            self._timer.resume()

    def stop(self, line: Text | Fit | None = None) -> None:
        """The run is over: `line` says how it went."""
        if line is not None:
            self.say(line)
        self._started = None
        self.remove_class("-running")
        if self._timer is not None:
            self._timer.pause()

    def running(self, line: Text | Sequence[Text], spark: list[float] | None = None) -> None:
        """The run's line (or its forms, longest first: the first that fits is shown); the
        elapsed seconds are appended and kept moving by the timer."""
        self._line = (line,) if isinstance(line, Text) else tuple(line)
        if spark is not None:
            self.query_one("#status-spark", Sparkline).data = spark[-48:]
        self._tick()

    def elapsed(self) -> float:
        return 0.0 if self._started is None else self.clock() - self._started

    def _tick(self) -> None:
        if self._line is None or self._started is None:
            return
        forms = []
        for line in self._line:
            text = line.copy()
            text.append(f" · {elapsed(self.elapsed())}", style="dim")
            forms.append(text)
        self.query_one("#status-text", StatusText).say(forms[0] if len(forms) == 1 else Fit(*forms))


__all__ = ["RunStatus", "StatusText", "styled"]
