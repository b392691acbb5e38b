"""The snapshot viewer: a memory snapshot's timeline, its peak, and what was live there.

    SnapshotViewScreen(summary)             # a lab.snapshots.SnapshotSummary
    python -m lab.tui.screens.snapshot_view dump_snapshot.pickle     # standalone

The plot shows allocated (and reserved) bytes over time, downsampled to ~2× its width keeping
each bucket's maximum, so a peak survives any zoom. A cursor walks the timeline; the inspector
under the plot shows the entry there: its action, size, allocated bytes, phase, and stack.
Keys: ←/→ move (shift: ×20), +/- zoom around the cursor, 0 whole run, p the peak,
o the next OOM, x why it failed (`memlab view`'s explanation and replay, in a page), escape back
(standalone, `memlab view FILE --app`: escape or q quits — the
viewer is the app's only screen, so there is no blank screen to fall back to).
Sizes follow the lab's one unit policy (GB = 10**9, stepping down), like every other screen.
"""

from __future__ import annotations

from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual_plotext import PlotextPlot

from lab.report import axis_unit, format_bytes, number, percent
from lab.snapshots import SnapshotSummary
from lab.snapshots import frames as fr
from lab.snapshots.text import when

from ..widgets.inspector import fit_stack


def fill(table: DataTable, width: int, headers: list[str], rows: list[list[str]], frame: int,
         keys: list | None = None) -> None:
    """`rows` in `table`, every column as wide as its widest cell; the `frame` column takes what
    the others leave, its paths shortened at their head (widths set here: Textual's automatic
    ones keep a column's first width when the table is filled again)."""
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(headers)]
    room = max(16, width - sum(w + 2 for k, w in enumerate(widths) if k != frame) - 2)
    rows = [[fit_stack(c, room) if k == frame else c for k, c in enumerate(r)] for r in rows]
    widths[frame] = max([len(headers[frame])] + [len(r[frame]) for r in rows])
    table.clear(columns=True)
    for h, w in zip(headers, widths):
        table.add_column(h, width=w)
    for r, key in zip(rows, keys or [None] * len(rows)):
        table.add_row(*r, key=key)


class TimelinePlot(PlotextPlot):
    """Allocated + reserved over time, the peak, OOMs and the cursor. Holds its window."""

    def __init__(self, summary: SnapshotSummary, **kwargs):
        super().__init__(**kwargs)
        self.summary = summary
        xs = summary.xs()
        self.x_min = xs[0] if len(xs) else 0
        self.x_max = xs[-1] if len(xs) else 1
        self.lo, self.hi = self.x_min, self.x_max
        self.cursor = summary.peak_time_us if summary.peak_time_us is not None else self.x_min

    def _tx(self, x: float) -> float:
        s = self.summary
        return (x - s.start_us) / 1e6 if s.x_unit == "us" else x

    def on_resize(self) -> None:
        self.replot()

    def replot(self) -> None:
        s = self.summary
        width = max(20, self.size.width or 80)
        xs, ys = s.series(2 * width, self.lo, self.hi)  # max per bucket: peaks survive
        p = self.plt
        p.clear_data()
        if not xs:
            p.title("no allocation history")
            self.refresh()
            return
        unit, div = axis_unit(max(max(ys), s.reserved_peak_bytes or 0))
        p.plot([self._tx(x) for x in xs], [y / div for y in ys], label="allocated")
        rx, ry = s.reserved_series(self.lo, self.hi)
        if rx:
            p.plot([self._tx(x) for x in rx], [y / div for y in ry], label="reserved")
        if s.peak_time_us is not None and self.lo <= s.peak_time_us <= self.hi:
            p.scatter([self._tx(s.peak_time_us)], [s.peak_bytes / div], marker="x", label="peak")
        for o in s.ooms:
            if o.time_us is not None and self.lo <= o.time_us <= self.hi:
                p.vline(self._tx(o.time_us), "red")
        p.vline(self._tx(self.cursor))
        p.xlabel("seconds" if s.x_unit == "us" else "allocation #")
        p.ylabel(unit)
        p.title(f"allocated memory · peak {format_bytes(s.peak_bytes)}")
        self.refresh()


class SnapshotViewScreen(Screen):
    """A snapshot (or a memlab result) in the viewer's shape: `SnapshotViewScreen(summary)`."""

    DEFAULT_CSS = """
    SnapshotViewScreen { layout: vertical; }
    SnapshotViewScreen #header { height: auto; padding: 0 1; color: $text-muted; }
    SnapshotViewScreen TimelinePlot { height: 1fr; min-height: 6; }
    SnapshotViewScreen #inspector { height: auto; max-height: 9; padding: 0 1;
                                    border-top: solid $primary-darken-2; }
    SnapshotViewScreen #tables { height: 1fr; min-height: 6; layout: vertical; }
    SnapshotViewScreen #tables > DataTable { width: 100%; height: 1fr; min-height: 3; }
    """
    BINDINGS = [
        # priority: the tables below have focus and would take the arrows for themselves
        Binding("left", "move(-1)", "←", show=False, priority=True),
        Binding("right", "move(1)", "→", show=False, priority=True),
        Binding("shift+left", "move(-20)", "← ×20", show=False, priority=True),
        Binding("shift+right", "move(20)", "→ ×20", show=False, priority=True),
        # short labels: at 80 columns the footer keeps every key, q quit included
        Binding("plus,equals_sign", "zoom(0.5)", "zoom in"),
        Binding("minus", "zoom(2)", "out"),
        Binding("0", "reset", "all"),
        Binding("p", "peak", "peak"),
        Binding("o", "next_oom", "OOM"),
        Binding("x", "explain_oom", "why"),
        Binding("escape", "back", "back"),
    ]

    class CursorMoved(Message):
        """Posted when the cursor lands on an entry (the app may show more about it)."""

        def __init__(self, index: int, x: float) -> None:
            super().__init__()
            self.index, self.x = index, x

    def __init__(self, summary: SnapshotSummary, **kwargs):
        super().__init__(**kwargs)
        self.summary = summary
        self._explanation: str | None = None  # `x`'s page, once made

    def compose(self) -> ComposeResult:
        s = self.summary
        yield Static(self._header(), id="header")
        yield TimelinePlot(s, id="plot")
        yield Static(id="inspector")
        with Horizontal(id="tables"):
            yield DataTable(id="groups", zebra_stripes=True, cursor_type="row")
            yield DataTable(id="blocks", zebra_stripes=True, cursor_type="row")
        yield Footer()

    def _header(self) -> str:
        s = self.summary
        guess = " (guess)" if s.guessed else ""
        parts = [fr.short_path(s.file) if s.file else "snapshot", f"{number(s.events)} entries",
                 f"peak {format_bytes(s.peak_bytes)} at {when(s, s.peak_time_us)}",
                 f"phase{guess}: {s.peak_phase or '—'}",
                 f"made by {s.peak_where or '—'}"]
        if s.reserved_peak_bytes is not None:
            parts.insert(3, f"reserved peak {format_bytes(s.reserved_peak_bytes)}")
        if s.ooms:
            parts.append(f"{len(s.ooms)} OOM")
        return " · ".join(parts)

    def on_mount(self) -> None:
        self._tables()
        self._inspect()

    def on_resize(self, event) -> None:
        self._tables()

    def _tables(self) -> None:
        """The two tables, one above the other, each frame ("file.py:23 main") fitted to the
        width its table leaves it: a long path loses its head, never its file:line."""
        s = self.summary
        width = (self.size.width or self.app.size.width) - 2  # the table's scrollbar
        total = s.peak_bytes or 1
        fill(self.query_one("#groups", DataTable), width, ["live at the peak, by first user "
                                                           "frame", "bytes", "blocks", "share"],
             [[g["where"], format_bytes(g["bytes"]), number(g["count"]),
               percent(g["bytes"] / total, signed=False)] for g in s.groups], frame=0)
        fill(self.query_one("#blocks", DataTable), width,
             ["largest blocks", "allocated", "phase", "where"],
             [[format_bytes(a.bytes), when(s, a.time_us), a.phase, a.where]
              for a in s.live_at_peak], frame=3,
             keys=[str(a.index) if a.index is not None else None for a in s.live_at_peak])

    # ---- the cursor and the window ------------------------------------------------------------
    @property
    def plot(self) -> TimelinePlot:
        return self.query_one(TimelinePlot)

    def _step(self) -> float:
        p = self.plot
        return max(1.0, (p.hi - p.lo) / max(20, p.size.width or 80))

    def action_move(self, n: int) -> None:
        p = self.plot
        p.cursor = min(p.x_max, max(p.x_min, p.cursor + n * self._step()))
        if not p.lo <= p.cursor <= p.hi:  # follow the cursor
            span = p.hi - p.lo
            p.lo = max(p.x_min, p.cursor - span / 2)
            p.hi = min(p.x_max, p.lo + span)
        self._update()

    def action_zoom(self, factor: float) -> None:
        p = self.plot
        span = max(1.0, (p.hi - p.lo) * factor)
        p.lo = max(p.x_min, p.cursor - span / 2)
        p.hi = min(p.x_max, p.lo + span)
        self._update()

    def action_reset(self) -> None:
        p = self.plot
        p.lo, p.hi = p.x_min, p.x_max
        self._update()

    def action_peak(self) -> None:
        if self.summary.peak_time_us is not None:
            self._jump(self.summary.peak_time_us)

    def action_next_oom(self) -> None:
        later = [o.time_us for o in self.summary.ooms
                 if o.time_us is not None and o.time_us > self.plot.cursor]
        first = [o.time_us for o in self.summary.ooms if o.time_us is not None]
        target = (later or first or [None])[0]
        if target is not None:
            self._jump(target)
            self.notify("x: why it failed, and would it have fit under other allocator settings",
                        timeout=4)
        else:
            self.notify("no out-of-memory event in this snapshot")

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "explain_oom" and not self.summary.ooms:
            return False  # no out-of-memory: the key is neither shown nor taken
        return True

    def action_explain_oom(self) -> None:
        """What `memlab view FILE` prints under an out-of-memory: the failing request, the
        verdict (fragmentation or shortage) and the replay under other allocator settings. The
        replay can take seconds on a long trace: a worker thread computes it."""
        if self._explanation is not None:  # the snapshot does not change: replayed once
            return self._show_explanation(self._explanation)
        self.notify("replaying the trace to the out-of-memory…", timeout=3)
        self.run_worker(self._explain, thread=True, exclusive=True, group="explain")

    def _explain(self) -> None:
        from lab.snapshots.oom import diagnose
        from lab.snapshots.oom_text import render_oom

        try:
            x, r = diagnose(self.summary)
            text = (render_oom(self.summary, x, r) if x is not None else
                    "This out-of-memory cannot be explained here: that needs the snapshot's "
                    "whole trace (a --window view holds part of it; `memlab view FILE` without "
                    "one explains it).")
        except Exception as e:  # a snapshot the replay cannot take: say so, keep the viewer
            text = f"The out-of-memory could not be replayed: {type(e).__name__}: {e}"
        self.app.call_from_thread(self._show_explanation, text)

    def _show_explanation(self, text: str) -> None:
        from .dialogs import TextScreen

        self._explanation = text
        self.app.push_screen(TextScreen("the out-of-memory, explained and replayed", text))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.dismiss()
        else:
            self.app.exit()

    @on(DataTable.RowSelected, "#blocks")
    def _block_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value
        if key is not None and self.summary.entry(int(key)) is not None:
            self._jump(self.summary.xs()[int(key)])

    def _jump(self, x: float) -> None:
        p = self.plot
        p.cursor = x
        if not p.lo <= x <= p.hi:
            span = p.hi - p.lo
            p.lo = max(p.x_min, x - span / 2)
            p.hi = min(p.x_max, p.lo + span)
        self._update()

    def _update(self) -> None:
        self.plot.replot()
        self._inspect()

    def _inspect(self) -> None:
        s = self.summary
        x = self.plot.cursor
        i = s.entry_near(x)
        e = s.entry(i)
        lines = [f"cursor {when(s, int(x))} · allocated {format_bytes(s.allocated_at(i))}"
                 + (f" · phase {s.band_at(x)}" if s.band_at(x) else "")]
        if e is not None:
            frames = e.get("frames") or []
            lines.append(f"entry #{number(i)}: {e.get('action')} {format_bytes(e.get('size', 0))} · "
                         f"{stack_heading(frames)}")
            lines += [f"    {line}" for line in frame_lines(frames)]
        elif s.source == "memlab-result":
            lines.append("(a memlab result keeps a downsampled timeline, not every event)")
        self.query_one("#inspector", Static).update("\n".join(lines))
        self.post_message(self.CursorMoved(i, x))


def stack_heading(frames: list) -> str:
    """Where the allocation was made: the user's frame; when there is none, why."""
    here = fr.where(frames)
    if here != fr.NO_STACK:
        return here
    if frames:  # only torch's dispatch and the lab's own tracker: no frame of the program
        return "no frame of your program on the stack"
    return fr.NO_STACK


def frame_lines(frames: list, limit: int = 5) -> list[str]:
    """The frames worth reading, innermost first; never the lab's tracker or torch's dispatch
    plumbing alone (they are on every allocation a lab run makes: they explain nothing)."""
    shown = [f for f in fr.shown_frames(frames) if not fr.is_machinery(f.get("filename", ""))]
    if not shown and frames:
        return ["(only torch's dispatch and the lab's tracker: made on a thread without your "
                "code, e.g. the autograd engine's)"]
    return [fr.label(f) for f in shown[:limit]]


class SnapshotViewApp(App):
    """Standalone: `memlab view FILE --app`, `python -m lab.tui.screens.snapshot_view FILE`."""

    BINDINGS = [Binding("q", "quit", "quit")]

    def __init__(self, summary: SnapshotSummary):
        super().__init__()
        self.summary = summary

    def get_default_screen(self) -> Screen:
        # the viewer *is* the app: Esc (back) then leaves it instead of uncovering a blank
        # default screen that no key could leave (only Ctrl+Q did)
        return SnapshotViewScreen(self.summary)


def main(argv: list[str] | None = None) -> int:
    import sys

    from lab.snapshots import SnapshotError, open_summary

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m lab.tui.screens.snapshot_view FILE", file=sys.stderr)
        return 2
    try:
        [summary, *_] = open_summary(args[0])
    except SnapshotError as e:
        print(f"memlab: error: {e}", file=sys.stderr)
        return 2
    SnapshotViewApp(summary).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
