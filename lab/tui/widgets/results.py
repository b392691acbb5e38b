"""`ResultsView`: what a lesson measured, before vs after, and where each number came from.

The *lead* results come first: on a machine without CUDA the H200 recording (played back),
on a GPU the learner's own run. Then: the overlaid timelines (each variant at its own
phases, the GPU's capacity, OOM points), the peak by category, the peaks table, the
prediction against the result, what each technique changed (by phase and by category), the
checks, then the other origin *beside* it (your own run, or the H200 recording), the run
history and the engine's notes. An OOM is a lesson moment, a crashed worker an error box.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from lab.curriculum import Lesson
from lab.measure.result import RunResult
from lab.progress import RunRecord

from ..look import percent, size, size_delta, variant_rgb
from .category_bars import CategoryBars
from .tables import (ResultSet, beside_table, checks_table, color, diff_tables, failure_box,
                     history_table, summary_table, variant_index)
from .timeline import Series, TimelinePlot


def variant_notes(results) -> list[str]:
    """Each note once, led by the variants that carry it when not every variant does (the
    allocator's margin above the tensors differs per variant and would read as repeats)."""
    carriers: dict[str, list[str]] = {}
    for r in results:
        for n in r.notes:
            if not n.startswith("stderr tail"):
                carriers.setdefault(n, []).append(r.variant)
    return [n if len(vs) == len(results) else f"{', '.join(vs)}: {n}"
            for n, vs in carriers.items()]


@dataclass
class ResultsData:
    lesson: Lesson
    lead: ResultSet = field(default_factory=ResultSet)
    beside: ResultSet = field(default_factory=ResultSet)
    prediction_gb: float | None = None
    prediction_question: tuple[str, str] | None = None  # (variant, scale) the prediction is for
    prediction_late: bool = False  # made after a result was on screen
    history: list[RunRecord] = field(default_factory=list)
    versions: str | None = None  # the learner's torch/transformers differ from the recording's
    restored: str | None = None  # "from your last session (date)"

    def color(self, variant: str) -> str:
        return color(self.lesson, variant)


def capacity_of(results: list[RunResult]) -> tuple[int, str] | None:
    """The GPU size that applied: a virtual cap (lesson or controls), else a real GPU's total."""
    for r in results:
        cap = r.device.virtual_bytes
        if cap:
            gib = f" ({cap // 2**30} GiB)" if cap % 2**30 == 0 else ""
            return cap, f"GPU capped at {size(cap)}{gib}"
    for r in results:
        if r.mode == "cuda" and r.device.total_bytes:
            return r.device.total_bytes, f"{r.device.name} capacity {size(r.device.total_bytes)}"
    return None


def series_of(lesson: Lesson, rs: ResultSet) -> list[Series]:
    ordered = sorted(rs.results, key=lambda r: variant_index(lesson, r.variant))
    return [Series.of(r, variant_rgb(variant_index(lesson, r.variant))) for r in ordered]


def plot_title(rs: ResultSet) -> str:
    first, short = rs.results[0], rs.source.short
    where = short if first.scale in short else f"{short}, {first.scale} scale"
    measured = [r for r in rs.results if r.peak.bytes]
    if not measured:  # e.g. cancelled before anything was measured: not "peak 0 GB"
        return f"{where} · stopped before a peak was measured"
    top = max(measured, key=lambda r: r.peak.bytes)
    return f"{where} · peak {size(top.peak.bytes)} {top.variant}"


def prediction_text(data: ResultsData) -> Text | None:
    if data.prediction_gb is None or not data.prediction_question:
        return None
    variant, scale = data.prediction_question
    text = Text("Your prediction: ", style="bold")
    text.append(f"{data.prediction_gb:g} GB for the {variant} peak at {scale} scale")
    text.append(" (made after a result was shown: not counted)" if data.prediction_late
                else " (committed before the run)", style="dim")
    text.append(". ")
    for rs in (data.lead, data.beside):
        r = rs.get(variant) if rs else None
        if r is not None and r.scale == scale and r.ok:
            gap = int(data.prediction_gb * 1e9) - r.peak.bytes
            text.append(f"{rs.source.short}: {size(r.peak.bytes)}; your guess was off by "
                        f"{size_delta(gap)}")
            if r.peak.bytes:
                text.append(f" ({percent(gap / r.peak.bytes)})")
            text.append(".")
            return text
    text.append(f"Run {variant} at {scale} scale to compare.", style="dim")
    return text


def bar_rows(results, color) -> list[tuple[str, str, object]]:
    """One bar per variant; a run of several ranks (torch.distributed) gets one bar per rank,
    side by side, so each GPU's memory by category shows (rank 0 first)."""
    rows = []
    for r in results:
        ranks = getattr(r, "ranks", None) or []
        if len(ranks) > 1:
            rows += [(f"{r.variant} · rank {i}", color(r.variant), rr) for i, rr in enumerate(ranks)]
        else:
            rows.append((r.variant, color(r.variant), r))
    return rows


class ResultsView(VerticalScroll):
    DEFAULT_CSS = """
    ResultsView { height: 1fr; }
    ResultsView > .box { height: auto; margin: 0 1 1 1; }
    ResultsView > #source { margin: 0 1; height: auto; }
    ResultsView > #failures { border: round $error; padding: 0 1; }
    ResultsView > #beside-note { color: $text-muted; margin: 0 1; height: auto; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="results-empty", classes="box")
        yield Static("", id="source")
        yield TimelinePlot("", id="timeline")
        yield Static("", id="summary", classes="box")
        yield Static("", id="failures", classes="box")
        yield Static("What was live at the peak", classes="box heading", id="bars-title")
        yield CategoryBars(id="bars", classes="box")
        yield Static("", id="prediction", classes="box")
        yield Static("", id="diff", classes="box")
        yield Static("", id="checks", classes="box")
        yield Static("", id="beside-note")
        yield TimelinePlot("", id="beside")
        yield Static("", id="beside-table", classes="box")
        yield Static("", id="history", classes="box")
        yield Static("", id="notes", classes="box")

    def on_mount(self) -> None:
        self._live_done: int | None = None  # variants finished in the live view (None: not live)
        self._live_series: list[Series] = []
        self.show(None)

    def show(self, data: ResultsData | None, empty_hint: Text | str = "") -> None:
        self._live_done = None
        lead = data.lead if data else ResultSet()
        has = bool(lead)
        empty = self.query_one("#results-empty", Static)
        empty.display = not has
        empty.update(empty_hint or Text("No results yet. Press r to run the experiment.",
                                        style="dim"))
        for wid in ("#source", "#timeline", "#bars-title", "#bars", "#summary"):
            self.query_one(wid).display = has
        if not has:
            for wid in ("#failures", "#prediction", "#diff", "#checks", "#beside-note",
                        "#beside", "#beside-table", "#history", "#notes"):
                self.query_one(wid).display = False
            return
        lesson, src = data.lesson, lead.source
        head = Text.assemble(("▶ ", "bold"), (src.long[0].upper() + src.long[1:], "bold"))
        if src.recorded:
            head.append(" — played back; not run on this machine.", style="dim")
        if data.restored:
            head.append(f" Shown {data.restored}.", style="dim")
        if data.versions:
            head.append("\n" + data.versions, style="yellow")
        self.query_one("#source", Static).update(head)
        failures = [r for r in lead.results if not r.ok]
        box = self.query_one("#failures", Static)
        box.display = bool(failures)
        box.update(Text("\n").join(failure_box(r, src) for r in failures))
        box.set_class(any(r.status in ("oom", "error") for r in failures), "-bad")
        self.query_one("#timeline", TimelinePlot).set_series(
            series_of(lesson, lead), plot_title(lead), capacity_of(lead.results))
        self.query_one("#bars-title", Static).update(f"What was live at the peak — {src.short}")
        self.query_one("#bars", CategoryBars).set_results(bar_rows(lead.results, data.color))
        self.query_one("#summary", Static).update(summary_table(lesson, lead))
        self._set("#prediction", prediction_text(data))
        self._set("#diff", diff_tables(lesson, lead))
        self._set("#checks", checks_table(lesson, lead))
        beside = data.beside
        self.query_one("#beside").display = bool(beside)
        note = None
        if beside:
            b = beside.source
            note = Text.assemble(("Beside it: ", "bold"), b.long[0].upper() + b.long[1:],
                                 "." if not b.recorded else " — not run on this machine.")
            self.query_one("#beside", TimelinePlot).set_series(
                series_of(lesson, beside), plot_title(beside), capacity_of(beside.results))
        self._set("#beside-note", note)
        self._set("#beside-table", beside_table(lesson, lead, beside) if beside else None)
        current = [r for rs in (lead, beside) for r in rs.results if rs.how != "recording"]
        self._set("#history", history_table(lesson, data.history, current))
        notes = variant_notes(lead.results)
        self._set("#notes", Text("\n".join(f"• {n}" for n in notes), style="dim") if notes else None)

    def show_live(self, lesson: Lesson, head: Text, finished: ResultSet,
                  partial: list[Series], capacity: tuple[int, str] | None) -> None:
        """During a run: the variants done so far and the running one's growing timeline.
        Called ~4×/s: the layout changes only when the run starts and when a variant ends."""
        if self._live_done != len(finished.results):
            if self._live_done is None:
                for wid in ("#results-empty", "#failures", "#bars-title", "#bars",
                            "#prediction", "#diff", "#checks", "#beside-note", "#beside",
                            "#beside-table", "#history", "#notes"):
                    self.query_one(wid).display = False
                self._set("#source", head)
                self.query_one("#timeline").display = True
            self._live_done = len(finished.results)
            self._live_series = series_of(lesson, finished) if finished else []
            self._set("#summary", summary_table(lesson, finished) if finished else None)
        self.query_one("#timeline", TimelinePlot).set_series(self._live_series + partial,
                                                             "so far", capacity)

    def _set(self, selector: str, renderable) -> None:
        w = self.query_one(selector, Static)
        w.display = renderable is not None
        if renderable is not None:
            w.update(renderable)


__all__ = ["ResultSet", "ResultsData", "ResultsView", "capacity_of", "prediction_text",
           "variant_index"]
