"""`ResultsView`: what a lesson measured, before vs after, and where each number came from.

The *lead* results come first: what the learner just did. After `r` without a GPU that is the
H200 recording (played back), after `y` (or any run on a GPU) the learner's own run, with the
difference to the recording first. Then: the overlaid timelines (each variant at its own
phases, the GPU's capacity, OOM points), the peak by category, the peaks table, the prediction
against the result, what each technique changed (by phase and by category), the checks, then
the other origin *beside* it, the run history and the notes: each note once per lesson (notes
that differ only in a number are one note), the recording's folded. When the learner's run and
the recording took other code paths, one line says so under the heading. An OOM is a lesson
moment, a crashed worker an error box.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Collapsible, Static

from lab.course.curriculum import Lesson
from lab.measure.allocator_view import measured_by_allocator
from lab.measure.result import RunResult
from lab.course.progress import RunRecord

from lab.report import capacity, format_bytes, given_gb, recorded_on, rough_percent, signed_bytes

from ..look import variant_rgb
from ..author_text import one_sentence_a_line
from ..provenance import code_path_line, is_version_note
from ..result_set import ResultSet
from .category_bars import CategoryBars
from .fit import Fit
from .lesson_text import CodeBlock
from .tables import (check_notes, checks_table, color, diff_tables, failure_box, history_table,
                     recorded_variant, summary_table, variant_index, versus_table)
from .timeline import Series, TimelinePlot

# a number as a note writes it, with its unit: "35,969,216 B", "+683,200 B", "32.00 MiB"
NOTE_NUMBER = re.compile(r"[+\-−]?\d[\d,]*(?:\.\d+)?(?:\s?(?:B|kB|MB|GB|KiB|MiB|GiB|%))?")


def lesson_notes(results, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Each note once per lesson. Notes that differ between variants only in their numbers
    (the allocator's margin above the tensors) are one note: the first variant's, the others'
    numbers in brackets. A note only some variants carry is led by their names. The engine's
    version notes are left to the one version line; a worker's stderr tail to the failure box."""
    results = list(results)
    groups: dict[str, list[tuple[str, str]]] = {}
    for r in results:
        for n in r.notes:
            if n.startswith("stderr tail") or is_version_note(n):
                continue
            groups.setdefault(NOTE_NUMBER.sub("#", n), []).append((r.variant, n))
    out = []
    for items in groups.values():
        first_variant, first = items[0]
        line = first
        others = []
        base = NOTE_NUMBER.findall(first)
        for v, n in items[1:]:
            if n != first:
                nums = [x for x, y in zip(NOTE_NUMBER.findall(n), base) if x != y]
                others.append(f"{v}: {', '.join(nums)}")
        if others:
            line = f"{first} ({first_variant}; {'; '.join(dict.fromkeys(others))})"
        carriers = list(dict.fromkeys(v for v, _ in items))
        if len(results) > 1 and len(carriers) < len(results):
            line = f"{', '.join(carriers)}: {line}"
        out.append(line)
    return out + [e for e in dict.fromkeys(extra) if e not in out]


@dataclass
class ResultsData:
    lesson: Lesson
    lead: ResultSet = field(default_factory=ResultSet)
    beside: ResultSet = field(default_factory=ResultSet)
    prediction_gb: float | None = None
    prediction_question: tuple[str, str] | None = None  # (variant, scale) the prediction is for
    prediction_late: bool = False  # made after a result was on screen
    history: list[RunRecord] = field(default_factory=list)
    versions: tuple[str, ...] | None = None  # (long … short): other code paths than the recording
    restored: str | None = None  # "from your last session (date)"

    @classmethod
    def of(cls, lesson: Lesson, state, lp, question, history: list[RunRecord]) -> ResultsData:
        """What a lesson screen's state puts on the Results tab (lab/tui/lesson_model.py)."""
        mine, recording = state.mine, state.recording
        return cls(
            lesson=lesson, lead=state.lead, beside=state.beside,
            prediction_gb=lp.prediction_gb if lp else None,
            prediction_question=(question.variant, question.scale) if question else None,
            prediction_late=bool(lp and lp.prediction_late), history=history,
            versions=code_path_line(mine.results, recording.results) if mine and recording
            else None, restored=state.restored)

    def color(self, variant: str) -> str:
        return color(self.lesson, variant)

    @property
    def mine_first(self) -> bool:
        """The learner's run leads, the recording beside it: their difference comes first."""
        return bool(self.lead and self.beside and not self.lead.recorded and self.beside.recorded)


def capacity_of(results: list[RunResult]) -> tuple[int, str] | None:
    """The GPU size that applied: a virtual cap (lesson or controls), else a real GPU's total;
    said once in GB and GiB (lab.report.capacity), the unit PyTorch's OOM message uses."""
    for r in results:
        cap = r.device.virtual_bytes
        if cap:
            return cap, f"GPU capped at {capacity(cap)}"
    for r in results:
        if r.on_gpu and r.device.total_bytes:
            total = r.device.total_bytes
            return total, f"{r.device.name} capacity {capacity(total)}"
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
    return f"{where} · peak {format_bytes(top.peak.bytes)} {top.variant}"


def prediction_text(data: ResultsData) -> Text | None:
    if data.prediction_gb is None or not data.prediction_question:
        return None
    variant, scale = data.prediction_question
    text = Text("Your prediction: ", style="bold")
    text.append(f"{given_gb(data.prediction_gb)} for the {variant} peak at {scale} scale")
    text.append(" (made after a result was shown: not counted)" if data.prediction_late
                else " (committed before the run)", style="dim")
    text.append(". ")
    for rs in (data.lead, data.beside):
        r = rs.get(variant) if rs else None
        if r is not None and r.scale == scale and r.ok:
            gap = int(data.prediction_gb * 1e9) - r.peak.bytes
            text.append(f"{rs.source.short}: {format_bytes(r.peak.bytes)}; your guess was off by "
                        f"{signed_bytes(gap)}")
            if r.peak.bytes:
                text.append(f" ({rough_percent(gap / r.peak.bytes)})")
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
    ResultsView > #versions { margin: 0 1; height: auto; color: $warning; }
    ResultsView > #failures { border: round $error; padding: 0 1; height: auto; }
    ResultsView > #failures > CodeBlock { margin: 0 0 1 0; }
    ResultsView > #beside-note { color: $text-muted; margin: 0 1; height: auto; }
    ResultsView > Collapsible { margin: 0 1 1 1; padding: 0; border: none; }
    ResultsView > Collapsible > Contents { padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="results-empty", classes="box")
        yield Static("", id="source")
        yield Static("", id="versions")
        yield Static("", id="first", classes="box")  # yours vs the recording, when yours leads
        yield TimelinePlot("", id="timeline")
        yield Static("", id="summary", classes="box")
        yield Vertical(id="failures", classes="box")
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
        with Collapsible(title="Notes on the recording", collapsed=True, id="recorded-notes"):
            yield Static("", id="recorded-notes-text")

    def on_mount(self) -> None:
        self._live_done: int | None = None  # variants finished in the live view (None: not live)
        self._live_series: list[Series] = []
        self._live = None  # the run's latest state, not drawn yet
        self.set_interval(0.25, self._draw_live)
        self.show(None)

    ALL = ("#source", "#versions", "#first", "#timeline", "#summary", "#failures", "#bars-title",
           "#bars", "#prediction", "#diff", "#checks", "#beside-note", "#beside",
           "#beside-table", "#history", "#notes", "#recorded-notes")

    def show(self, data: ResultsData | None, empty_hint: Text | str = "") -> None:
        self._live_done, self._live = None, None
        lead = data.lead if data else ResultSet()
        empty = self.query_one("#results-empty", Static)
        empty.display = not lead
        empty.update(empty_hint or Text("No results yet. Press r to run the experiment.",
                                        style="dim"))
        if not lead:
            for wid in self.ALL:
                self.query_one(wid).display = False
            return
        for wid in ("#source", "#timeline", "#bars-title", "#bars", "#summary"):
            self.query_one(wid).display = True
        lesson, src = data.lesson, lead.source
        if data.mine_first:
            other = data.beside.source.short
            heads = [Text.assemble(("▶ Your run: ", "bold"), src.long, " — beside the ", other,
                                   " (the difference first)."),
                     Text.assemble(("▶ Your run: ", "bold"), src.short, ", beside the ", other,
                                   " (difference first)")]
        else:
            heads = [Text.assemble(("▶ ", "bold"), (src.long[0].upper() + src.long[1:], "bold"))]
            if src.recorded:
                heads[0].append(" — played back; not run on this machine.", style="dim")
        for h in heads:
            if data.restored:
                h.append(f" Shown {data.restored}.", style="dim")
        head = Fit(*heads)
        self.query_one("#source", Static).update(head)
        self._set("#versions", Fit(*(Text(v) for v in data.versions)) if data.versions else None)
        self._set("#first", versus_table(lesson, lead, data.beside) if data.mine_first else None)
        failures = [r for r in lead.results if not r.ok]
        box = self.query_one("#failures", Vertical)
        box.display = bool(failures)
        box.remove_children()
        for r in failures:  # the message in a block that scrolls: a URL in it is never broken
            head, message = failure_box(r, src)
            box.mount(Static(head))
            if message:
                box.mount(CodeBlock(one_sentence_a_line(message), "text"))
        box.set_class(any(r.status in ("oom", "error") for r in failures), "-bad")
        self.query_one("#timeline", TimelinePlot).set_series(
            series_of(lesson, lead), plot_title(lead), capacity_of(lead.results))
        uncategorised = all(measured_by_allocator(r) and not r.peak.by_category
                            for r in lead.results if r.ok)
        self.query_one("#bars-title", Static).update(
            f"What was live at the peak — {src.short}"
            + (" (totals: the allocator measured these runs, not the tracker)"
               if uncategorised else ""))
        self.query_one("#bars", CategoryBars).set_results(bar_rows(lead.results, data.color))
        self.query_one("#summary", Static).update(summary_table(lesson, lead))
        self._set("#prediction", prediction_text(data))
        self._set("#diff", diff_tables(lesson, lead))
        self._set("#checks", checks_table(lesson, lead, with_notes=False))
        beside = data.beside
        self.query_one("#beside").display = bool(beside)
        note = None
        if beside:
            b = beside.source
            note = Text.assemble(("Beside it: ", "bold"), b.long[0].upper() + b.long[1:],
                                 "." if not b.recorded else " — not run on this machine.")
            unrecorded = [r.variant for r in lead.results if not recorded_variant(lesson, r.variant)]
            if beside.is_recording and unrecorded:  # a variant of sim only (lesson.toml: modes = ["sim"])
                note.append(f" {', '.join(unrecorded)}: simulated, not recorded on the "
                            f"{recorded_on(beside.results)}.",
                            style="dim")
            self.query_one("#beside", TimelinePlot).set_series(
                series_of(lesson, beside), plot_title(beside), capacity_of(beside.results))
        self._set("#beside-note", note)
        self._set("#beside-table", versus_table(lesson, beside, lead)
                  if beside and not data.mine_first else None)
        current = [r for rs in (lead, beside) for r in rs.results if not rs.recorded]
        self._set("#history", history_table(lesson, data.history, current))
        self._notes(lead, beside)

    def _notes(self, lead: ResultSet, beside: ResultSet) -> None:
        """The learner's run's notes in full; the recording's folded (byte-level allocator
        detail that a learner opens when they want it)."""
        mine = next((rs for rs in (lead, beside) if rs and not rs.recorded), ResultSet())
        theirs = next((rs for rs in (lead, beside) if rs and rs.recorded), ResultSet())
        notes = lesson_notes(mine.results, check_notes(mine)) if mine else []
        self._set("#notes", Text("\n".join(f"• {n}" for n in notes), style="dim")
                  if notes else None)
        folded = lesson_notes(theirs.results, check_notes(theirs)) if theirs else []
        box = self.query_one("#recorded-notes", Collapsible)
        box.display = bool(folded)
        if folded:
            box.title = f"Notes on the {theirs.source.short} ({len(folded)})"
            self.query_one("#recorded-notes-text", Static).update(
                Text("\n".join(f"• {n}" for n in folded), style="dim"))

    def show_live(self, lesson: Lesson, head: Text, state, capacity: tuple[int, str] | None,
                  now: bool = False) -> None:
        """During a run (a `LessonRun` state): the variants done so far and the running ones'
        growing timelines. Drawn at most 4×/s (`now`: at once); the layout changes only when
        the run starts and when a variant ends."""
        self._live = (lesson, head, state, capacity)
        if now:
            self._draw_live()

    def _draw_live(self) -> None:
        if self._live is None:
            return
        lesson, head, state, capacity = self._live
        self._live = None
        finished = ResultSet(state.finished, state.plan.origin).in_order(state.variants)
        partial = [Series(name, variant_rgb(variant_index(lesson, name)), list(d.x), list(d.y),
                          list(d.phases)) for name, d in state.live if d.x]
        if self._live_done != len(finished.results):
            if self._live_done is None:
                for wid in ("#results-empty", *self.ALL):
                    self.query_one(wid).display = False
                self._set("#source", head)
                self.query_one("#timeline").display = True
            self._live_done = len(finished.results)
            self._live_series = series_of(lesson, finished) if finished else []
            # the first variant's result is on screen as soon as it ends
            self._set("#summary", summary_table(lesson, finished) if finished else None)
        self.query_one("#timeline", TimelinePlot).set_series(self._live_series + partial,
                                                             "so far", capacity)

    def _set(self, selector: str, renderable) -> None:
        w = self.query_one(selector, Static)
        w.display = renderable is not None
        if renderable is not None:
            w.update(renderable)


__all__ = ["ResultSet", "ResultsData", "ResultsView", "capacity_of", "lesson_notes",
           "prediction_text", "variant_index"]
