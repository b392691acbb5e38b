"""The lab's text plots (plotext): live memory over time, and peak memory against step time.

    timeline_plot(results)       `memlab run`, `memlab compare`, the Markdown export
    tradeoff_plot(comparison)    `memlab compare`, the Markdown export
    draw_tradeoff(plt, rows)     the same chart on any plotext `plt` (the app's playground screen)

Kept apart from lab.report, the headless core, which never imports a plotting or UI library
(pyproject's `headless` contract): the commands hand these to it (`export(..., plots=text_plots)`)
or print them beside its reports. plotext is imported lazily: where it is missing (a GPU box with
only torch) each plot is one line saying so, and the reports print the same.
"""

from __future__ import annotations

import shutil

from lab.measure.result import RunResult
from lab.report import axis_unit
from lab.report.text import step_series


def timeline_plot(results: list[RunResult], width: int | None = None, height: int = 18,
                  color: bool = False) -> str:
    """Overlaid live-memory timelines (allocation # on x), one line per result that has one."""
    results = [r for r in results if r.timeline.index]
    if not results:
        return "(no timeline)"
    try:
        import plotext as plt
    except ImportError:
        return "(install plotext to see the timeline)"
    width = width or min(120, shutil.get_terminal_size((100, 30)).columns)
    unit, div = axis_unit(max((r.peak.bytes for r in results), default=0))
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    for r in results:
        xs, ys = step_series(r.timeline.index, r.timeline.live)
        plt.plot(xs, [b / div for b in ys], label=r.variant)
        if r.peak.index >= 0:
            plt.scatter([r.peak.index], [r.peak.bytes / div], marker="x")
    plt.title("live tensor memory over time")
    plt.xlabel("allocation #")
    plt.ylabel(unit)
    text = plt.build()
    return text if color else plt.uncolorize(text)


def draw_tradeoff(plt, rows, title: str = "peak memory vs step time") -> None:
    """Peak memory against step time on `plt` (the plotext module, or a PlotextPlot's `plt`):
    one point per combination, labelled; shared by the Markdown report and the app's screen."""
    unit, div = axis_unit(max(r.peak_bytes for r in rows))
    xs = [r.step_time_s * 1000 for r in rows]
    ys = [r.peak_bytes / div for r in rows]
    for r, x, y in zip(rows, xs, ys):  # the point is the label's first character: "● ckpt"
        plt.text(f"● {r.combo}", x, y, alignment="left")
    pad_x = (max(xs) - min(xs)) * 0.25 or max(xs) * 0.25 or 1
    pad_y = (max(ys) - min(ys)) * 0.15 or max(ys) * 0.1 or 1
    plt.xlim(min(xs) - pad_x * 0.2, max(xs) + pad_x)
    plt.ylim(max(0, min(ys) - pad_y), max(ys) + pad_y)
    plt.title(title)
    plt.xlabel("step time (ms)")
    plt.ylabel(f"peak {unit}")


def tradeoff_plot(c, width: int = 100, height: int = 16) -> str:
    """Peak memory against step time, one labelled point per combination of a Comparison."""
    pts = [r for r in c.rows if r.status == "ok" and r.step_time_s is not None]
    if not pts:
        return ("(no step times: sim measures bytes only; run with --mode cpu or cuda for the "
                "memory / time trade-off)")
    try:
        import plotext as plt
    except ImportError:
        return "(install plotext to see the trade-off chart)"
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    draw_tradeoff(plt, pts, title="peak memory vs step time (lower left is better)")
    return plt.uncolorize(plt.build())


__all__ = ["draw_tradeoff", "timeline_plot", "tradeoff_plot"]
