"""`InspectorView`: a cursor on the timeline and what was live under it.

←/→ move the cursor one recorded point (shift: ten), home/end jump to the ends, m to the peak,
v switches variant; clicking the plot puts the cursor there. Below: the bytes live at that
event, its phase, and the largest live storages (size, category, phase, the Python frame that
allocated it) — from `RunResult.blocks`, the largest storages the engine kept.
"""

from __future__ import annotations

from bisect import bisect_right

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Select, Static

from lab.course.curriculum import Lesson
from lab.measure.result import Block, RunResult

from lab.report import format_bytes

from ..look import category_color, variant_rgb
from .fit import Fit
from .tables import variant_index
from .timeline import Series, TimelinePlot


def live_blocks(result: RunResult, index: int) -> list[Block]:
    """Blocks alive just after event `index`, largest first."""
    alive = [b for b in result.blocks
             if b.alloc_index <= index and (b.free_index is None or b.free_index > index)]
    return sorted(alive, key=lambda b: -b.nbytes)


def short_stack(stack: str) -> str:
    """'01-linear-baseline/experiment.py:25 baseline' -> 'experiment.py:25 baseline'."""
    if not stack:
        return "—"
    head, _, tail = stack.partition("/experiment.py")
    return "experiment.py" + tail if tail or stack.endswith("/experiment.py") else stack


def fit_stack(stack: str, room: int) -> str:
    """The frame that allocated, in `room` columns: its file:line always (what a learner opens),
    so a long path loses its head, not its tail: "…/loss/loss_utils.py:47 ForCausalLMLoss",
    then "…/loss_utils.py:47 ForCausalLMLoss", then without the function, then "…" and the
    end of "file.py:line"."""
    text = short_stack(stack)
    if len(text) <= room:
        return text
    where, _, func = text.partition(" ")
    parts = where.split("/")
    for k in range(1, len(parts)):
        shorter = "…/" + "/".join(parts[k:]) + (f" {func}" if func else "")
        if len(shorter) <= room:
            return shorter
    last = "…/" + parts[-1] if len(parts) > 1 else parts[-1]
    if len(last) <= room:
        return last
    return "…" + parts[-1][-(max(1, room - 1)):]


def phase_at(result: RunResult, index: int) -> str:
    phase = ""
    for name, start in result.timeline.phase_starts:
        if start <= index:
            phase = name
    return phase


class InspectorView(Vertical, can_focus=True):
    DEFAULT_CSS = """
    InspectorView { height: 1fr; }
    InspectorView > #inspector-bar { height: 1; }
    InspectorView > #inspector-bar > Select { width: 24; }
    InspectorView > #inspector-bar > Static { width: 1fr; padding: 0 1; color: $text-muted; }
    InspectorView > TimelinePlot { height: 1fr; min-height: 9; }
    InspectorView > #cursor-info { height: auto; padding: 0 1; }
    InspectorView > DataTable { height: auto; max-height: 45%; }
    InspectorView:focus > TimelinePlot { border-left: outer $accent; }
    """

    # none in the footer: at 80 columns it is full with the lesson's keys; the bar above the
    # plot lists these ("←/→ move · shift ×10 · m peak · v variant")
    BINDINGS = [
        Binding("left", "move(-1)", "◀ event", show=False),
        Binding("right", "move(1)", "event ▶", show=False),
        Binding("shift+left", "move(-10)", "◀◀", show=False),
        Binding("shift+right", "move(10)", "▶▶", show=False),
        Binding("home", "jump('start')", "start", show=False),
        Binding("end", "jump('end')", "end", show=False),
        Binding("m", "jump('peak')", "to peak", show=False),
        Binding("v", "next_variant", "variant", show=False),
    ]

    class CursorMoved(Message):
        def __init__(self, variant: str, index: int) -> None:
            super().__init__()
            self.variant, self.index = variant, index

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.lesson: Lesson | None = None
        self.results: dict[str, RunResult] = {}
        self.variant: str | None = None
        self.pos = 0  # position in the variant's timeline (a recorded point)
        self.source = ""

    def compose(self) -> ComposeResult:
        with Horizontal(id="inspector-bar"):
            yield Select([], prompt="variant", compact=True, allow_blank=True, id="inspector-variant")
            yield Static(Fit(Text("←/→ move · shift ×10 · m peak · v variant · click the plot"),
                             Text("←/→ move · shift ×10 · m peak · v variant")))
        yield TimelinePlot("", aligned=False, id="inspector-plot")
        yield Static("", id="cursor-info")
        table = DataTable(id="blocks", cursor_type="row", zebra_stripes=True)
        yield table

    def on_resize(self, event) -> None:
        self._refresh_view()  # the frames' column takes what the width leaves

    def on_mount(self) -> None:
        table = self.query_one("#blocks", DataTable)
        table.add_columns("size", "category", "phase", "lifetime", "allocated at")
        self._refresh_view()

    # ---- data (calls down) -----------------------------------------------------------------
    def show(self, lesson: Lesson, results: list[RunResult], source: str = "") -> None:
        self.lesson = lesson
        self.source = source  # where these results came from ("H200 recording", ...)
        self.results = {r.variant: r for r in results if r.timeline.live}
        select = self.query_one("#inspector-variant", Select)
        options = [(v, v) for v in self.results]
        select.set_options(options)
        if self.variant not in self.results:
            self.variant = next(iter(self.results), None)
        if self.variant is not None:
            select.value = self.variant
        self.action_jump("peak")

    @property
    def result(self) -> RunResult | None:
        return self.results.get(self.variant) if self.variant else None

    @property
    def index(self) -> int | None:
        r = self.result
        if r is None or not r.timeline.live:
            return None
        xs = r.timeline.index or list(range(len(r.timeline.live)))
        return xs[min(self.pos, len(xs) - 1)]

    # ---- actions ---------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        r = self.result
        if r is None:
            return
        self.pos = max(0, min(len(r.timeline.live) - 1, self.pos + step))
        self._refresh_view()

    def action_jump(self, where: str) -> None:
        r = self.result
        if r is None:
            self._refresh_view()
            return
        n = len(r.timeline.live)
        if where == "start":
            self.pos = 0
        elif where == "end":
            self.pos = n - 1
        else:
            self.pos = self._pos_of(r.peak.index) if r.peak.index >= 0 else max(
                range(n), key=r.timeline.live.__getitem__)
        self._refresh_view()

    def action_next_variant(self) -> None:
        names = list(self.results)
        if not names:
            return
        i = names.index(self.variant) if self.variant in names else -1
        self.query_one("#inspector-variant", Select).value = names[(i + 1) % len(names)]

    def _pos_of(self, index: int) -> int:
        r = self.result
        xs = r.timeline.index or list(range(len(r.timeline.live)))
        return max(0, bisect_right(xs, index) - 1)

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.value in self.results and event.value != self.variant:
            self.variant = event.value
            self.action_jump("peak")

    def on_timeline_plot_clicked(self, event: TimelinePlot.Clicked) -> None:
        event.stop()
        if self.result is not None:
            self.pos = self._pos_of(event.index)
            self._refresh_view()
            self.focus()

    # ---- drawing ---------------------------------------------------------------------------
    def _refresh_view(self) -> None:
        plot = self.query_one("#inspector-plot", TimelinePlot)
        info = self.query_one("#cursor-info", Static)
        table = self.query_one("#blocks", DataTable)
        table.clear()
        r = self.result
        if r is None or self.lesson is None:
            plot.set_series([], "Timeline inspector")
            info.update(Text("Run the experiment to inspect its timeline.", style="dim"))
            return
        idx = self.index
        plot.cursor = idx
        plot.set_series([Series.of(r, variant_rgb(variant_index(self.lesson, r.variant)))],
                        f"{r.variant}" + (f" ({self.source})" if self.source else "")
                        + f": cursor at event {idx}")
        live = r.timeline.live[self.pos]
        blocks = live_blocks(r, idx)
        shown = sum(b.nbytes for b in blocks)
        text = Text.assemble(("event ", "dim"), (f"{idx}", "bold"),
                             ("/", "dim"), f"{r.timeline.index[-1] if r.timeline.index else len(r.timeline.live) - 1}",
                             ("  phase ", "dim"), (phase_at(r, idx) or "—", "bold"),
                             ("  live ", "dim"), (format_bytes(live), "bold"))
        if r.peak.index == idx:
            text.append("  ◆ the peak", style="bold red")
        if not r.blocks:
            text.append("\nno block details: the run did not finish", style="dim")
        elif blocks:
            text.append(f"\n{len(blocks)} largest live storages shown: {format_bytes(shown)} of {format_bytes(live)}",
                        style="dim")
        info.update(text)
        rows = [(format_bytes(b.nbytes), b.category.replace("_", " "), b.phase,
                 f"#{b.alloc_index}→" + (f"#{b.free_index}" if b.free_index is not None
                                         else "end"), b) for b in blocks[:50]]
        # the frame takes what the other columns leave (2 columns of padding each, and the
        # scrollbar): file:line stays in view at 80 columns
        used = sum(max([len(h)] + [len(r[k]) for r in rows]) + 2
                   for k, h in enumerate(("size", "category", "phase", "lifetime"))) + 2 + 2
        width = table.size.width or self.size.width or self.app.size.width
        room = max(12, width - used)
        for size_text, category, phase, life, b in rows:
            table.add_row(Text(size_text, justify="right"),
                          Text(category, style=category_color(b.category)), phase, life,
                          fit_stack(b.stack, room))
        self.post_message(self.CursorMoved(r.variant, idx))
