"""`TimelinePlot`: live bytes over allocation events, variants overlaid, phases and peak marked.

x is the allocation-event index (the same axis in every mode), y is GB (10**9). Series are
downsampled at draw time to ~2× the widget width, keeping the max of every bucket so a peak is
never lost. An optional cursor (the inspector's) is drawn as a vertical line; clicking the plot
posts `TimelinePlot.Clicked` with the event index under the mouse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual import events
from textual.message import Message
from textual_plotext import PlotextPlot

from lab.measure.result import RunResult

from ..look import CURSOR_RGB, PHASE_RGB, Rgb, int_ticks, nice_ticks, tick_label

@dataclass
class Series:
    label: str
    rgb: Rgb
    x: list[int]
    y: list[int]  # bytes
    phase_starts: list[tuple[str, int]] = field(default_factory=list)
    peak: tuple[int, int] | None = None  # (event index, bytes)

    @classmethod
    def of(cls, result: RunResult, rgb: Rgb, label: str | None = None) -> Series:
        tl = result.timeline
        x = list(tl.index) if tl.index else list(range(len(tl.live)))
        peak = None
        if tl.live:
            if result.peak.bytes and result.peak.index >= 0:
                peak = (result.peak.index, result.peak.bytes)
            else:
                i = max(range(len(tl.live)), key=tl.live.__getitem__)
                peak = (x[i], tl.live[i])
        return cls(label or result.variant, rgb, x, list(tl.live), list(tl.phase_starts), peak)


def downsample_max(x: list[int], y: list[int], buckets: int) -> tuple[list[int], list[int]]:
    """At most `buckets` points: for each bucket of consecutive points, the one with max y."""
    n = len(y)
    if n <= buckets or buckets < 2:
        return list(x), list(y)
    out_x, out_y = [], []
    size = n / buckets
    for b in range(buckets):
        lo, hi = int(b * size), int((b + 1) * size)
        if hi <= lo:
            continue
        i = max(range(lo, hi), key=y.__getitem__)
        out_x.append(x[i])
        out_y.append(y[i])
    # keep the last point so the curve ends where the run ended
    if out_x[-1] != x[-1]:
        out_x.append(x[-1])
        out_y.append(y[-1])
    return out_x, out_y


def step_points(x: list[int], y: list[int]) -> tuple[list[float], list[float]]:
    """Memory holds its value until the next event: draw steps, not slopes."""
    if not x:
        return [], []
    sx, sy = [float(x[0])], [float(y[0])]
    for i in range(1, len(x)):
        sx += [float(x[i]), float(x[i])]
        sy += [float(y[i - 1]), float(y[i])]
    return sx, sy


class TimelinePlot(PlotextPlot):
    DEFAULT_CSS = """
    TimelinePlot { height: 12; min-height: 8; }
    """

    class Clicked(Message):
        def __init__(self, plot: "TimelinePlot", index: int) -> None:
            super().__init__()
            self.plot, self.index = plot, index

        @property
        def control(self) -> "TimelinePlot":
            return self.plot

    def __init__(self, title: str = "", *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.title = title
        self.series: list[Series] = []
        self.cursor: int | None = None  # event index
        self.show_phase_labels = True
        self._frame: tuple[int, int] | None = None  # plot-area columns (left, right) of last draw
        self._xlim: tuple[float, float] = (0.0, 1.0)
        self._version = 0  # bumped by every replot; part of the render cache key
        self._cache = None

    # ---- data (calls down) -----------------------------------------------------------------
    def set_series(self, series: list[Series], title: str | None = None) -> None:
        self.series = [s for s in series if s.x]
        if title is not None:
            self.title = title
        self.replot()

    def set_cursor(self, index: int | None) -> None:
        self.cursor = index
        self.replot()

    def on_resize(self, event) -> None:
        self.refresh()

    # ---- drawing ---------------------------------------------------------------------------
    def replot(self) -> None:
        """Mark the plot out of date; it is drawn at the next render, at the real size."""
        self._version += 1
        self.refresh()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(self.title)
        width = max(self.size.width, 20)
        if not self.series:
            plt.xlabel("no run yet")
            plt.yticks([0], ["0"])
            return
        xmin = min(s.x[0] for s in self.series)
        xmax = max(s.x[-1] for s in self.series)
        if xmax == xmin:
            xmax = xmin + 1
        ymax = max(max(s.y) for s in self.series) / 1e9
        ticks = nice_ticks(ymax or 1e-9, n=max(2, min(5, (self.size.height - 5) // 2)))
        plt.ylim(0, ticks[-1])
        plt.xlim(xmin, xmax)
        self._xlim = (float(xmin), float(xmax))
        plt.yticks(ticks, [tick_label(t) for t in ticks])
        xt = int_ticks(int(xmin), int(xmax))
        plt.xticks(xt, [str(x) for x in xt])
        plt.ylabel("GB")
        plt.xlabel("allocation event #")

        # phase boundaries of the first series (the baseline), labelled along the bottom when
        # there is room (the legend sits top-left)
        first = self.series[0]
        starts = [(name, x) for name, x in first.phase_starts if xmin < x <= xmax]
        for name, x in starts:
            plt.vline(x, color=PHASE_RGB)
        buckets = max(8, 2 * width)
        for s in self.series:
            dx, dy = downsample_max(s.x, s.y, buckets)
            sx, sy = step_points(dx, dy)
            plt.plot(sx, [v / 1e9 for v in sy], color=s.rgb, label=s.label, marker="braille")
        if self.show_phase_labels:
            # columns are approximate (the y labels take ~4): a label gets the room up to the
            # next phase line, and is left out below 3 characters
            cols = max(10, width - 6)
            at = [(name, (x - xmin) / (xmax - xmin) * cols) for name, x in starts]
            for i, (name, c) in enumerate(at):
                room = int((at[i + 1][1] if i + 1 < len(at) else cols) - c) - 1
                if room >= 3:
                    plt.text(name[:room], x=starts[i][1], y=0, color=PHASE_RGB, alignment="left")
        for s in self.series:
            if s.peak is not None:
                px, py = s.peak
                plt.scatter([px], [py / 1e9], color=s.rgb, marker="●")
        if self.cursor is not None:
            plt.vline(self.cursor, color=CURSOR_RGB)
            plt.text("▼", x=self.cursor, y=ticks[-1], color=CURSOR_RGB, alignment="center")

    def render(self):
        # plotext builds cost ~30 ms at 120 columns: rebuild only when something changed
        key = (self.size, self._version, self.app.theme)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        self._draw()
        text = super().render()
        self._cache = (key, text)
        # remember where the plot area is, so a click can be mapped to an event index
        for line in text.plain.splitlines():
            if "┌" in line and "┐" in line:
                self._frame = (line.index("┌"), line.rindex("┐"))
                break
        return text

    def index_at(self, column: int) -> int | None:
        """The event index under a widget column (None outside the plot area)."""
        if not self._frame or not self.series:
            return None
        left, right = self._frame
        if not left < column < right:
            return None
        lo, hi = self._xlim
        frac = (column - left - 1) / max(1, right - left - 2)
        return round(lo + frac * (hi - lo))

    def on_click(self, event: events.Click) -> None:
        index = self.index_at(event.x)
        if index is not None:
            self.post_message(self.Clicked(self, index))
