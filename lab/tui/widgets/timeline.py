"""`TimelinePlot`: live bytes over a run, variants overlaid, each at its own phases.

Aligned (results): the x axis is the phase-aligned axis of `lab.tui.align` — every phase gets
a segment as wide as its longest variant, so a before/after comparison reads phase by phase;
the phase names are written under the frame. Not aligned (inspector): x is the
allocation-event index and a cursor can be drawn. y is in the unit `lab.report.axis_unit` picks
(GB = 10**9, stepping down). Series are downsampled at draw time to ~2× the widget width,
keeping the max of every bucket so a peak is never lost.

Marked: each variant's peak (●), where a run ran out of memory (✕, at the bytes it asked for),
and the GPU's capacity when one applies (a horizontal line). The legend is written under the
plot, never over the data, and says when two variants are drawn exactly on top of each other.
Clicking the plot posts `TimelinePlot.Clicked` with the event index under the mouse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual import events
from textual.message import Message
from textual_plotext import PlotextPlot

from lab.measure.result import RunResult
from lab.report import axis_unit, number
from lab.report.downsample import downsample

from ..align import Axis, align
from ..plotting import coincide, phase_label, step_points, tried_bytes
from ..look import CURSOR_RGB, PHASE_RGB, Rgb, hex_of, int_ticks, nice_ticks

CAPACITY_RGB: Rgb = (214, 39, 40)
@dataclass
class Series:
    label: str
    rgb: Rgb
    x: list[int]
    y: list[int]  # bytes
    phase_starts: list[tuple[str, int]] = field(default_factory=list)
    peak: tuple[int, int] | None = None  # (event index, bytes)
    oom_bytes: int | None = None  # an OOM run: the live bytes plus the allocation that failed

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
        oom = None
        if result.status == "oom" and tl.live:
            oom = tl.live[-1] + (tried_bytes(result.error) or 0)
        return cls(label or result.variant, rgb, x, list(tl.live), list(tl.phase_starts), peak,
                   oom)


def pack(items: list[Text], width: int) -> list[Text]:
    """Legend items in lines of at most `width` cells, two spaces apart."""
    lines: list[Text] = []
    for item in items:
        if lines and lines[-1].cell_len + 2 + item.cell_len <= width:
            lines[-1].append("  ")
            lines[-1].append_text(item)
        else:
            lines.append(item.copy())
    return lines


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

    def __init__(self, title: str = "", *, aligned: bool = True, id: str | None = None,
                 classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.title = title
        self.aligned = aligned
        self.series: list[Series] = []
        self.capacity: tuple[int, str] | None = None  # (bytes, what it is)
        self.cursor: int | None = None  # event index (not aligned)
        self.axis: Axis | None = None
        self.notes: list[str] = []  # what the legend says beyond the series (tests read it)
        self.placed: list[tuple[str, str, int]] = []  # phase labels under the frame
        self._frame: tuple[int, int] | None = None  # plot-area columns (left, right) of last draw
        self._xlim: tuple[float, float] = (0.0, 1.0)
        self._version = 0  # bumped by every replot; part of the render cache key
        self._cache = None

    # ---- data (calls down) -----------------------------------------------------------------
    def set_series(self, series: list[Series], title: str | None = None,
                   capacity: tuple[int, str] | None = None) -> None:
        self.series = [s for s in series if s.x]
        self.capacity = capacity
        if title is not None:
            self.title = title
        self.axis = None
        if self.aligned and self.series:
            self.axis = align([(s.phase_starts, s.x[0], s.x[-1]) for s in self.series])
        self.replot()

    def set_cursor(self, index: int | None) -> None:
        self.cursor = index
        self.replot()

    def on_resize(self, event) -> None:
        self.refresh()

    def replot(self) -> None:
        """Mark the plot out of date; it is drawn at the next render, at the real size."""
        self._version += 1
        self.refresh()

    # ---- geometry --------------------------------------------------------------------------
    def _xs(self, k: int, s: Series) -> list[float]:
        if self.axis is None:
            return [float(v) for v in s.x]
        return [self.axis.x(k, v) for v in s.x]

    def _top(self) -> tuple[float, bool]:
        """(the y range's top in bytes, whether the capacity line is inside it)."""
        ymax = max(max(max(s.y), s.oom_bytes or 0) for s in self.series)
        cap = self.capacity[0] if self.capacity else None
        shown = cap is not None and cap <= 2.5 * max(ymax, 1)
        return max(ymax, cap if shown else 0), shown

    # ---- the legend (under the plot, never over the data) ----------------------------------
    def legend(self) -> list[Text]:
        """The legend's items; `pack` lays them out in lines, an item never split."""
        items: list[Text] = []
        self.notes = []
        if not self.series:
            return items
        for s in self.series:
            items.append(Text.assemble(("━ ", hex_of(s.rgb)), s.label))
        items.append(Text("● peak", style="dim"))
        if any(s.oom_bytes is not None for s in self.series):
            items.append(Text("✕ out of memory", style="bold red"))
        if self.capacity:
            cap, what = self.capacity
            inside = self._top()[1]
            note = f"─ {what}" if inside else f"{what}: above the top of the plot"
            items.append(Text(note, style=hex_of(CAPACITY_RGB)))
            self.notes.append(note)
        top = self._top()[0]
        xs = [self._xs(k, s) for k, s in enumerate(self.series)]
        for j in range(1, len(self.series)):
            for i in range(j):
                if coincide(xs[i], self.series[i].y, xs[j], self.series[j].y, 0.015 * top):
                    note = f"{self.series[i].label} = {self.series[j].label}, drawn under it"
                    items.append(Text(note, style="italic"))
                    self.notes.append(note)
                    break
        return items

    # ---- drawing ---------------------------------------------------------------------------
    def _draw(self, height: int) -> None:
        plt = self.plt
        plt.clear_figure()
        width = max(self.size.width, 20)
        if not self.series:
            plt.title(self.title)
            plt.xticks([], [])
            plt.yticks([0], ["0"])
            return
        top, cap_inside = self._top()
        unit, div = axis_unit(top)
        plt.title(f"{self.title} · y in {unit}" if self.title else f"y in {unit}")
        ticks = nice_ticks(top / div or 1e-9, n=max(2, min(5, (height - 4) // 2)))
        plt.ylim(0, ticks[-1])
        plt.yticks(ticks, [number(t) for t in ticks])
        xs = [self._xs(k, s) for k, s in enumerate(self.series)]
        xmin = min(x[0] for x in xs)
        xmax = max(x[-1] for x in xs)
        if xmax <= xmin:
            xmax = xmin + 1
        plt.xlim(xmin, xmax)
        self._xlim = (float(xmin), float(xmax))
        if self.axis is not None:
            plt.xticks([], [])  # the phase names are written under the frame instead
            for seg in self.axis.segments:
                if xmin < seg.start <= xmax:
                    plt.vline(seg.start, color=PHASE_RGB)
        else:
            xt = int_ticks(int(xmin), int(xmax))
            plt.xticks(xt, [str(x) for x in xt])
            first = self.series[0]
            for _, x in first.phase_starts:
                if xmin < x <= xmax:
                    plt.vline(x, color=PHASE_RGB)
        if self.capacity and cap_inside:
            plt.hline(self.capacity[0] / div, color=CAPACITY_RGB)
        buckets = max(8, 2 * width)
        for k, s in enumerate(self.series):
            dx, dy = downsample(xs[k], s.y, buckets)
            sx, sy = step_points(dx, dy)
            plt.plot(sx, [v / div for v in sy], color=s.rgb, marker="braille")
        for k, s in enumerate(self.series):
            if s.peak is not None:
                px = self.axis.x(k, s.peak[0]) if self.axis else s.peak[0]
                plt.scatter([px], [s.peak[1] / div], color=s.rgb, marker="●")
            if s.oom_bytes is not None:
                plt.scatter([xs[k][-1]], [s.oom_bytes / div], color=s.rgb, marker="✕")
        if self.cursor is not None and self.axis is None:
            plt.vline(self.cursor, color=CURSOR_RGB)
            plt.text("▼", x=self.cursor, y=ticks[-1], color=CURSOR_RGB, alignment="center")

    def _phase_line(self, width: int) -> Text:
        """Phase names under the frame, each at its segment, never cut."""
        line = Text()
        if self.axis is None or not self._frame:
            return line
        left, right = self._frame
        lo, hi = self._xlim
        cols = [(seg.name, left + 1 + (seg.start - lo) / (hi - lo) * (right - left - 2))
                for seg in self.axis.segments if seg.name]
        chars = [" "] * width
        self.placed = []  # (phase, label, column): what the line shows (tests read it)
        free = 0  # the first column a label may use (one blank after the previous label)
        for i, (name, c) in enumerate(cols):
            start = max(int(round(c)), free)
            end = int(round(cols[i + 1][1])) if i + 1 < len(cols) else right
            label = phase_label(name, end - start - 1)
            if label and start + len(label) <= width:
                chars[start:start + len(label)] = list(label)
                free = start + len(label) + 1
                self.placed.append((name, label, start))
        line.append("".join(chars).rstrip(), style=hex_of(PHASE_RGB))
        return line

    def render(self):
        # plotext builds cost ~30 ms at 120 columns: rebuild only when something changed
        key = (self.size, self._version, self.app.theme)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        width = max(self.size.width, 20)
        legend_lines = pack(self.legend(), width)
        extra = len(legend_lines) + (1 if self.axis is not None else 0)
        height = max(5, self.size.height - extra)
        self._draw(height)
        plt = self.plt
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        text = Text.from_ansi(plt.build())
        # remember where the plot area is, so a click can be mapped to an event index
        self._frame = None
        for line in text.plain.splitlines():
            if "┌" in line and "┐" in line:
                self._frame = (line.index("┌"), line.rindex("┐"))
                break
        text.rstrip()
        if self.axis is not None:
            text.append("\n")
            text.append(self._phase_line(width))
        for line in legend_lines:
            text.append("\n")
            text.append(line)
        self._cache = (key, text)
        return text

    def index_at(self, column: int) -> int | None:
        """The event index under a widget column (None outside the plot area)."""
        if not self._frame or not self.series or self.axis is not None:
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


__all__ = ["Series", "TimelinePlot", "coincide", "phase_label", "step_points",
           "tried_bytes"]
