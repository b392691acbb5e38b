"""The results tab's tables: peaks, checks, what each technique changed, the recording vs
your own run, the run history. Rich renderables built from results, nothing else.

The numbers, the rows and the Δ-vs-baseline rule are lab.report's (one display policy for the
app, `memlab run` and the exports: the same peak, the same Δ, the same rounding); this module
picks the columns and styles the cells. Every table names where its numbers came from
(`provenance.Source`). A value that was never reached (an OOM stopped the run first) says so
instead of showing a measured zero.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from lab.course.curriculum import Lesson
from lab.measure.allocator_view import measured_by_allocator
from lab.measure.result import RunResult
from lab.measure.trace import CATEGORIES
from lab.course.progress import RunRecord
from lab.report import (DASH, delta_text as delta_words, difference, format_bytes,
                        peak_text as peak_words, result_rows, row_of, seconds, signed_bytes,
                        status_text as status_word, step_text as step_words, vs_text)
from lab.report.rows import check_gap, delta_note

from ..align import merge_orders, phase_keys
from ..look import STATUS_STYLE, category_color, variant_color
from ..provenance import Source
from ..result_set import ResultSet
from .fit import Col, FitTable


def variant_index(lesson: Lesson, variant: str) -> int:
    names = [v.name for v in lesson.variants]
    return names.index(variant) if variant in names else len(names)


def color(lesson: Lesson, variant: str) -> str:
    return variant_color(variant_index(lesson, variant))


def signed_style(d: int | None) -> str:
    """Less memory is green, more is red."""
    return "" if not d else "green" if d < 0 else "red"


def status_text(status: str) -> Text:
    return Text(status_word(status), style=STATUS_STYLE.get(status, ""))


def peak_text(r: RunResult) -> Text:
    """'4.40 GB'; 'OOM after 2.20 GB' (where it stopped: it needed more); '—'."""
    return Text(peak_words(row_of(r)), style="" if r.ok else "red")


def dim_dash() -> Text:
    return Text(DASH, style="dim")


def cpu_timing_note(results) -> str | None:
    """Step times measured on a CPU say so: one untimed-noise pass, not a GPU's time."""
    if any(r.timed and not r.on_gpu and r.step_time_s is not None for r in results):
        return ("CPU timings: not the GPU's (one timed pass on this CPU, noisy: compare the "
                "memory, not the speed)")
    return None


def summary_table(lesson: Lesson, rs: ResultSet) -> Group:
    """Peaks, Δ vs the baseline, step times; the CUDA allocator's own peaks in a second table.
    At 80 columns the headers take their short forms, then the status goes (the peak cell says
    "OOM after …" itself), then the table splits in two with the variant in each part: the peak
    phase and the step time are never dropped."""
    results = rs.results
    rows = result_rows(results)
    cols = [Col("variant", key=True), Col("status", drop=2),
            Col("peak", "right", numeric=True), Col("Δ vs baseline", "right", numeric=True,
                                                    short="Δ"),
            Col("peak phase"), Col("step time", "right", numeric=True, short="step")]
    cells = [[Text(r.variant, style=f"bold {color(lesson, r.variant)}"), status_text(r.status),
              peak_text(r), Text(delta_words(row), style=signed_style(row.delta_bytes)
                                 if not row.is_baseline else "dim"),
              r.peak.phase or DASH, step_words(row)]
             for r, row in zip(results, rows)]
    notes = [n for n in (delta_note(rows), cpu_timing_note(results)) if n]
    parts = [FitTable(f"Peak per variant — {rs.source.short}", cols, cells,
                      caption="; ".join(notes) or None)]
    if any(r.allocator for r in results):
        a_cols = [Col("variant", key=True), Col("tensors", "right", numeric=True),
                  Col("allocated", "right", numeric=True, short="alloc."),
                  Col("reserved", "right", numeric=True, short="resv.")]
        a_rows = [[Text(r.variant, style=color(lesson, r.variant)),
                   Text("—", style="dim") if measured_by_allocator(r) else peak_text(r),
                   format_bytes(r.allocator.peak_allocated_bytes),
                   format_bytes(r.allocator.peak_reserved_bytes)]
                  for r in results if r.allocator]
        parts.append(FitTable("The CUDA caching allocator's own peaks (its blocks: rounding "
                              "and workspaces included)" if not any(
                                  r.allocator.predicted for r in results if r.allocator) else
                              "The CUDA caching allocator's peaks, predicted by its model",
                              a_cols, a_rows))
    return Group(*parts)


def check_notes(rs: ResultSet) -> list[str]:
    """The checks' notes (what the allocator holds beyond numel × itemsize), each once."""
    out: list[str] = []
    for r in rs.results:
        for c in r.checks:
            line = f"{c.name}: {c.note}"
            if c.note and line not in out:
                out.append(line)
    return out


def checks_table(lesson: Lesson, rs: ResultSet, with_notes: bool = True) -> FitTable | None:
    rows = [(r, c) for r in rs.results for c in r.checks]
    if not rows:
        return None
    phase_of = {c["name"]: c["phase"] for c in lesson.checks}
    cols = [Col("check", key=True, wrap=True), Col("variant", key=True),
            Col("expected", "right", numeric=True, short="expect"),
            Col("measured", "right", numeric=True, short="measure"), Col("", numeric=True)]
    table_rows = []
    for r, c in rows:
        reached = r.ok or (r.phase(phase_of.get(c.name, "")) is not None and c.measured_bytes)
        if not reached:
            measured, mark = Text("not reached", style="dim"), Text("")
        else:
            measured = Text(format_bytes(c.measured_bytes))
            close = (c.measured_bytes == c.expected_bytes if c.expected_bytes == 0
                     else abs(c.ratio - 1) <= 0.01)  # within 1 %: the allocator's rounding
            gap = check_gap(c)
            mark = Text("✔ match" if gap == "none" else gap, style="green" if close else "yellow")
        table_rows.append([c.name, Text(r.variant, style=color(lesson, r.variant)),
                           format_bytes(c.expected_bytes), measured, mark])
    notes = check_notes(rs) if with_notes else []
    return FitTable(f"Expected vs measured — {rs.source.short}", cols, table_rows,
                    notes=Text("\n".join(f"• {n}" for n in notes[:6]), style="dim")
                    if notes else None)


def _phase_peaks(r: RunResult) -> dict:
    return dict(zip(phase_keys([(p.name, 0) for p in r.phases]), r.phases))


def _delta_header(lesson: Lesson, r: RunResult) -> tuple[Text, str]:
    name = r.variant if len(r.variant) <= 12 else r.variant[:11] + "…"
    return Text(f"Δ {r.variant}", style=color(lesson, r.variant)), f"Δ {name}"


def diff_tables(lesson: Lesson, rs: ResultSet) -> Group | None:
    """Per phase and per category: what each variant changed against the baseline. Many
    variants at 80 columns: the Δ columns go in parts, the phase (category) in each."""
    base = next((r for r in rs.results if r.variant == "baseline" and r.ok), None)
    others = [r for r in rs.results if r is not base and r.phases]
    if base is None or not others:
        return None
    by_phase = [_phase_peaks(r) for r in [base, *others]]
    order = merge_orders([list(p) for p in by_phase])

    def columns(first: str) -> list[Col]:
        cols = [Col(first, key=True), Col("baseline", "right", numeric=True, key=True)]
        for r in others:
            header, short = _delta_header(lesson, r)
            cols.append(Col(header.plain, "right", numeric=True, short=short))
        return cols

    rows = []
    for key in order:
        b = by_phase[0].get(key)
        row = [key[0], format_bytes(b.peak_bytes) if b else Text("—", style="dim")]
        for r, phases in zip(others, by_phase[1:]):
            p = phases.get(key)
            if p is None:
                row.append(Text("not reached" if r.status == "oom" else "—", style="dim"))
            elif b is None:
                row.append(Text(format_bytes(p.peak_bytes), style="dim"))
            else:
                d = p.peak_bytes - b.peak_bytes
                row.append(Text(signed_bytes(d), style="green" if d < 0 else "red" if d > 0 else "dim"))
        rows.append(row)
    cat_rows = []
    for cat in CATEGORIES:
        values = [r.peak.by_category.get(cat, 0) for r in [base, *others]]
        if not any(values):
            continue
        row = [Text(cat.replace("_", " "), style=category_color(cat)), format_bytes(values[0])]
        for r, v in zip(others, values[1:]):
            if not r.ok:
                row.append(Text("—", style="dim"))
                continue
            d = v - values[0]
            row.append(Text(signed_bytes(d), style="green" if d < 0 else "red" if d > 0 else "dim"))
        cat_rows.append(row)
    by_category = (Text(NO_CATEGORIES, style="dim")
                   if not cat_rows and all(measured_by_allocator(r) for r in [base, *others]) else
                   FitTable("…and category by category, at each variant's peak",
                            columns("category"), cat_rows))
    return Group(
        FitTable(f"What each technique changed, phase by phase (peak in the phase) — "
                 f"{rs.source.short}", columns("phase"), rows),
        Text(""), by_category)


# runs measured by the allocator alone (lab/measure/allocator_view: steps outside the tracker)
NO_CATEGORIES = ("No categories at the peaks: these runs were measured by the CUDA allocator, "
                 "which does not know what a block holds (the tensor tracker does, and the "
                 "steps ran outside it).")


def recorded_variant(lesson: Lesson, name: str) -> bool:
    """False for a lesson variant that runs in sim only (lesson.toml `modes = ["sim"]`): no H200
    recording of it exists, and the tables say so instead of a bare dash."""
    try:
        return lesson.variant(name).recorded
    except (KeyError, AttributeError):
        return True


def versus_table(lesson: Lesson, mine: ResultSet, theirs: ResultSet) -> FitTable:
    """One origin against another, variant by variant, with the difference (mine − theirs)."""
    cols = [Col("variant", key=True), Col(mine.source.short, "right", numeric=True),
            Col(theirs.source.short, "right", numeric=True),
            Col("difference", "right", numeric=True, wrap=True, short="diff.")]
    rows = []
    for r in mine.results:
        other = theirs.get(r.variant)
        unrecorded = other is None and theirs.is_recording and not recorded_variant(lesson, r.variant)
        if unrecorded:  # simulated only: the recording cannot have it
            diff = Text("simulated only", style="dim")
        elif other is None:
            diff = Text("—", style="dim")
        elif r.scale != other.scale:
            diff = Text(f"{r.scale} vs {other.scale} scale: compare shapes", style="dim")
        else:
            d, frac = difference(row_of(r), row_of(other))
            diff = Text(vs_text(d, frac)) if d is not None else dim_dash()
        rows.append([Text(r.variant, style=color(lesson, r.variant)), peak_text(r),
                     peak_text(other) if other else Text("not recorded" if unrecorded else "—",
                                                         style="dim"), diff])
    return FitTable(f"{mine.source.short} vs {theirs.source.short}: the peaks", cols, rows)


def beside_table(lesson: Lesson, lead: ResultSet, beside: ResultSet) -> FitTable:
    """The other origin next to the lead one (beside − lead)."""
    return versus_table(lesson, beside, lead)


def history_table(lesson: Lesson, history: list[RunRecord],
                  current: list[RunResult]) -> FitTable | None:
    # earlier runs of this lesson, newest first, compared with the same variant/mode/scale now
    now = {(r.variant, r.mode, r.scale): r for r in current}
    older = list(reversed(history))[:8]
    if not older:
        return None
    cols = [Col("when", drop=2), Col("variant", key=True), Col("mode"), Col("status"),
            Col("peak", "right", numeric=True), Col("vs now", "right", numeric=True, drop=1),
            Col("step time", "right", numeric=True, short="step", drop=3)]
    rows = []
    for h in older:
        r = now.get((h.variant, h.mode, h.scale))
        vs = signed_bytes(r.peak.bytes - h.peak_bytes) if r and r.ok and h.status == "ok" else "—"
        rows.append([h.created.replace("T", " ")[:16],
                     Text(h.variant, style=color(lesson, h.variant)), f"{h.mode}/{h.scale}",
                     status_text(h.status), format_bytes(h.peak_bytes) if h.status == "ok" else "—", vs,
                     seconds(h.step_time_s)])
    return FitTable("Your earlier runs of this lesson, newest first", cols, rows)


def failure_box(r: RunResult, source: Source) -> tuple[Text, str | None]:
    """What a failed variant means, and the message it failed with (quoted in a block of its
    own that scrolls: PyTorch's OOM text is read as it is, a URL in it whole), or None."""
    where = f" ({source.short})"
    if r.status == "oom":
        t = Text("⚠ Out of memory — ", style="bold red")
        t.append(f"{r.variant} did not fit{where}. ", style="bold")
        t.append("This is a result, not a bug: the timeline stops at the allocation that failed "
                 "(✕ on the plot). Try a bigger GPU, or a variant that lowers the peak. "
                 "PyTorch's message:")
        return t, r.error or None
    if r.status == "cancelled":
        return Text(f"■ {r.variant}: cancelled{where} — the timeline shows what streamed before "
                    "the stop.", style="yellow"), None
    if r.status == "timeout":
        return Text(f"⏱ {r.variant}{where}: {r.error}", style="yellow"), None
    return Text(f"✘ {r.variant} failed{where}:", style="bold red"), r.error or "unknown error"


__all__ = ["ResultSet", "beside_table", "check_notes", "checks_table", "color", "cpu_timing_note",
           "diff_tables", "failure_box", "history_table", "peak_text", "status_text",
           "summary_table", "variant_index", "versus_table"]
