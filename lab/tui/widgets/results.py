"""`ResultsView`: everything one run of a lesson measured, before vs after.

(a) the overlaid timelines, (b) the peak by category, (c) expected vs measured, peak, Δ vs
baseline and step time, (d) on a machine without CUDA the recorded H200 reference beside the
learner's run, then the prediction gap, the run history and the engine's notes. An OOM is a
lesson moment (what happened and what to try), a crashed worker an error box: both are results.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich import box
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from lab.curriculum import Lesson
from lab.measure.result import RunResult
from lab.progress import RunRecord

from ..look import (STATUS_LABEL, STATUS_STYLE, gb, gb_delta, percent, seconds, signed_gb,
                    variant_color,
                    variant_rgb)
from .category_bars import CategoryBars
from .timeline import Series, TimelinePlot


@dataclass
class ResultsData:
    lesson: Lesson
    results: list[RunResult] = field(default_factory=list)
    references: dict[str, RunResult] = field(default_factory=dict)  # shown when no CUDA
    prediction_gb: float | None = None
    prediction_question: tuple[str, str] | None = None  # (variant, scale) the prediction is for
    history: list[RunRecord] = field(default_factory=list)

    def color(self, variant: str) -> str:
        return variant_color(variant_index(self.lesson, variant))


def variant_index(lesson: Lesson, variant: str) -> int:
    names = [v.name for v in lesson.variants]
    return names.index(variant) if variant in names else len(names)


def status_text(status: str) -> Text:
    return Text(STATUS_LABEL.get(status, status), style=STATUS_STYLE.get(status, ""))


def summary_table(data: ResultsData) -> Table:
    results = data.results
    base = next((r for r in results if r.variant == "baseline" and r.ok), None)
    t = Table(title="Measured", title_justify="left", title_style="bold", expand=False,
              header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    t.add_column("variant", no_wrap=True)
    t.add_column("status")
    t.add_column("peak", justify="right", no_wrap=True)
    t.add_column("Δ vs baseline", justify="right", no_wrap=True)
    t.add_column("peak phase")
    t.add_column("step time", justify="right", no_wrap=True)
    if data.references:
        t.add_column("H200 peak (recorded)", justify="right", no_wrap=True)
    for r in results:
        delta = (r.peak.bytes - base.peak.bytes) if base and r.ok and r is not base else None
        if r is base:
            delta_text = Text("(baseline)", style="dim")
        elif delta is None:
            delta_text = Text("—", style="dim")
        else:
            pct = f" ({percent(delta / base.peak.bytes)})" if base.peak.bytes else ""
            delta_text = Text(gb_delta(delta) + pct, style="green" if delta < 0 else "red" if delta > 0 else "")
        step = seconds(r.step_time_s) if r.step_time_s is not None else (
            "none (sim)" if r.mode == "sim" else "—")
        row = [Text(r.variant, style=f"bold {data.color(r.variant)}"), status_text(r.status),
               gb(r.peak.bytes) if r.peak.bytes or r.ok else "—", delta_text, r.peak.phase or "—",
               step]
        if data.references:
            ref = data.references.get(r.variant)
            row.append(gb(ref.peak.bytes) if ref else "—")
        t.add_row(*row)
    return t


def checks_table(data: ResultsData) -> Table | None:
    rows = [(r, c) for r in data.results for c in r.checks]
    if not rows:
        return None
    t = Table(title="Expected vs measured", title_justify="left", title_style="bold",
              header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    t.add_column("check")
    t.add_column("variant", no_wrap=True)
    t.add_column("expected", justify="right", no_wrap=True)
    t.add_column("measured", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    for r, c in rows:
        if not r.ok and c.measured_bytes == 0:
            measured, mark = Text("not reached", style="dim"), Text("")
        else:
            measured = Text(gb(c.measured_bytes))
            ratio = c.ratio
            good = abs(ratio - 1) <= 0.01
            mark = Text("✔ match" if good else f"×{ratio:.3f}", style="green" if good else "yellow")
        t.add_row(c.name, Text(r.variant, style=data.color(r.variant)), gb(c.expected_bytes),
                  measured, mark)
    return t


def history_table(data: ResultsData) -> Table | None:
    # earlier runs of this lesson, newest first, compared with the same variant/mode/scale now
    current = {(r.variant, r.mode, r.scale): r for r in data.results}
    older = [h for h in reversed(data.history)][: 8 + len(current)]
    if not older:
        return None
    t = Table(title="Run history (this lesson, newest first)", title_justify="left",
              title_style="bold", header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    for name, just in (("when", "left"), ("variant", "left"), ("mode", "left"),
                       ("status", "left"), ("peak", "right"), ("vs now", "right"),
                       ("step time", "right")):
        t.add_column(name, justify=just, no_wrap=True)
    for h in older[:8]:
        now = current.get((h.variant, h.mode, h.scale))
        vs = gb_delta(now.peak.bytes - h.peak_bytes) if now and now.ok and h.status == "ok" else "—"
        t.add_row(h.created.replace("T", " ")[:16], Text(h.variant, style=data.color(h.variant)),
                  f"{h.mode}/{h.scale}", status_text(h.status), gb(h.peak_bytes), vs,
                  seconds(h.step_time_s))
    return t


def prediction_text(data: ResultsData) -> Text | None:
    if data.prediction_gb is None or not data.prediction_question:
        return None
    variant, scale = data.prediction_question
    text = Text("Your prediction: ", style="bold")
    text.append(f"{data.prediction_gb:g} GB for the {variant} peak at {scale} scale. ")
    measured = next((r for r in data.results if r.variant == variant and r.scale == scale
                     and r.ok), None)
    if measured is None:
        text.append(f"Run {variant} at {scale} scale to compare.", style="dim")
        return text
    m = measured.peak.bytes / 1e9
    gap = data.prediction_gb - m
    text.append(f"Measured {m:.2f} GB ({measured.mode}); gap {signed_gb(gap)}")
    if m:
        text.append(f" ({percent(gap / m)})")
    return text


def failure_box(r: RunResult) -> Text:
    if r.status == "oom":
        t = Text("⚠ Out of memory — ", style="bold red")
        t.append(f"{r.variant} did not fit. ", style="bold")
        t.append("This is a result, not a bug: the timeline stops at the allocation that failed. "
                 "Try a bigger virtual GPU, or a variant that lowers the peak.\n")
        t.append(r.error or "", style="red")
        return t
    if r.status == "cancelled":
        return Text(f"■ {r.variant}: cancelled — the timeline shows what streamed before the stop.",
                    style="yellow")
    if r.status == "timeout":
        return Text(f"⏱ {r.variant}: {r.error}", style="yellow")
    t = Text(f"✘ {r.variant} failed — ", style="bold red")
    t.append(r.error or "unknown error")
    return t


class ResultsView(VerticalScroll):
    DEFAULT_CSS = """
    ResultsView { height: 1fr; }
    ResultsView > .box { height: auto; margin: 0 1 1 1; }
    ResultsView > #failures { border: round $error; padding: 0 1; }
    ResultsView > #reference-note { color: $text-muted; margin: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="results-empty", classes="box")
        yield Static("", id="failures", classes="box")
        yield TimelinePlot("Your run: live memory", id="timeline")
        yield Static("What was live at the peak", classes="box heading", id="bars-title")
        yield CategoryBars(id="bars", classes="box")
        yield Static("", id="summary", classes="box")
        yield Static("", id="prediction", classes="box")
        yield Static("", id="checks", classes="box")
        yield Static("", id="reference-note")
        yield TimelinePlot("H200 reference (recorded)", id="reference")
        yield Static("", id="history", classes="box")
        yield Static("", id="notes", classes="box")

    def on_mount(self) -> None:
        self.show(None)

    def show(self, data: ResultsData | None) -> None:
        results = data.results if data else []
        has = bool(results)
        empty = self.query_one("#results-empty", Static)
        empty.display = not has
        empty.update(Text("No results yet. Press r to run the experiment (every selected variant); "
                          "results appear here.", style="dim"))
        for wid in ("#timeline", "#bars-title", "#bars", "#summary"):
            self.query_one(wid).display = has
        if data is None:
            for wid in ("#failures", "#prediction", "#checks", "#reference-note", "#reference",
                        "#history", "#notes"):
                self.query_one(wid).display = False
            return
        lesson = data.lesson
        failures = [r for r in results if not r.ok]
        box = self.query_one("#failures", Static)
        box.display = bool(failures)
        box.update(Text("\n").join(failure_box(r) for r in failures))
        box.set_class(any(r.status in ("oom", "error") for r in failures), "-bad")

        if has:
            first = results[0]
            top = max(results, key=lambda r: r.peak.bytes)
            title = (f"Your run ({first.mode}, {first.scale}) · "
                     f"● peak {gb(top.peak.bytes)} {top.variant}")
            self.query_one("#timeline", TimelinePlot).set_series(
                [Series.of(r, variant_rgb(variant_index(lesson, r.variant))) for r in results], title)
            self.query_one("#bars", CategoryBars).set_results(
                [(r.variant, data.color(r.variant), r) for r in results])
            self.query_one("#summary", Static).update(summary_table(data))
        pred = prediction_text(data)
        self._set("#prediction", pred)
        self._set("#checks", checks_table(data))
        refs = data.references
        ref_plot = self.query_one("#reference", TimelinePlot)
        ref_plot.display = bool(refs)
        note = self.query_one("#reference-note", Static)
        note.display = bool(refs)
        if refs:
            any_ref = next(iter(refs.values()))
            note.update(Text.assemble(
                ("Recorded reference — ", "bold"),
                f"not run on this machine: {any_ref.device.name}, mode {any_ref.mode}, "
                f"{any_ref.scale} scale" + (f", {any_ref.created[:10]}" if any_ref.created else "")
                + ". Compare its shape with your run above."))
            ordered = sorted(refs.values(), key=lambda r: variant_index(lesson, r.variant))
            ref_plot.set_series(
                [Series.of(r, variant_rgb(variant_index(lesson, r.variant))) for r in ordered],
                f"H200 reference, recorded ({any_ref.device.name})")
        self._set("#history", history_table(data))
        notes = [n for r in results for n in r.notes if not n.startswith("stderr tail")]
        notes = list(dict.fromkeys(notes))
        self._set("#notes", Text("\n".join(f"• {n}" for n in notes), style="dim") if notes else None)

    def _set(self, selector: str, renderable) -> None:
        w = self.query_one(selector, Static)
        w.display = renderable is not None
        if renderable is not None:
            w.update(renderable)


__all__ = ["ResultsData", "ResultsView", "variant_index"]
