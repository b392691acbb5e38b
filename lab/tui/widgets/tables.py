"""The results tab's tables: peaks, checks, what each technique changed, the recording vs
your own run, the run history. Rich renderables built from results, nothing else.

Every table names where its numbers came from (`provenance.Source`). Sizes go through
`look.size` / `look.size_delta` (lab.report.units). A value that was never reached (an OOM
stopped the run first) says so instead of showing a measured zero.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from lab.course.curriculum import Lesson
from lab.measure.result import RunResult
from lab.measure.trace import CATEGORIES
from lab.course.progress import RunRecord

from ..align import merge_orders, phase_keys
from ..look import (STATUS_LABEL, STATUS_STYLE, category_color, percent, seconds, size,
                    size_delta, variant_color)
from ..provenance import Source
from ..result_set import ResultSet
from .fit import Col, FitTable


def variant_index(lesson: Lesson, variant: str) -> int:
    names = [v.name for v in lesson.variants]
    return names.index(variant) if variant in names else len(names)


def color(lesson: Lesson, variant: str) -> str:
    return variant_color(variant_index(lesson, variant))


def status_text(status: str) -> Text:
    return Text(STATUS_LABEL.get(status, status), style=STATUS_STYLE.get(status, ""))


def peak_text(r: RunResult) -> Text:
    if r.ok:
        return Text(size(r.peak.bytes))
    if r.status == "oom" and r.peak.bytes:
        return Text(f"≥{size(r.peak.bytes)}", style="red")  # it needed more than it reached
    return Text("—", style="dim")


def baseline_of(results) -> RunResult | None:
    return next((r for r in results if r.variant == "baseline" and r.ok), None)


def reached_baseline(results) -> RunResult | None:
    """The baseline when it ran out of memory after reaching some bytes: a lower bound."""
    return next((r for r in results if r.variant == "baseline" and r.status == "oom"
                 and r.peak.bytes), None)


def delta_text(r: RunResult, base: RunResult | None, bound: RunResult | None) -> Text:
    """Δ vs the baseline; against a baseline that ran out of memory, a bound: it needed at
    least what it reached, so a variant that fits saved at least the difference (lesson 18)."""
    if r is base or r is bound:
        return Text("(baseline)", style="dim")
    if base is not None and r.ok:
        d = r.peak.bytes - base.peak.bytes
        pct = f" ({percent(d / base.peak.bytes)})" if base.peak.bytes else ""
        return Text(size_delta(d) + pct, style="green" if d < 0 else "red" if d > 0 else "")
    if bound is not None and r.ok and r.peak.bytes < bound.peak.bytes:
        d = r.peak.bytes - bound.peak.bytes
        return Text(f"≤{size_delta(d)} (≤{percent(d / bound.peak.bytes)})", style="green")
    return Text("—", style="dim")


def step_text(r: RunResult) -> str:
    if r.step_time_s is not None:
        return seconds(r.step_time_s)
    return "—" if r.timed else "none (sim)"


def cpu_timing_note(results) -> str | None:
    """Step times measured on a CPU say so: one untimed-noise pass, not a GPU's time."""
    if any(r.timed and not r.on_gpu and r.step_time_s is not None for r in results):
        return ("CPU timings: not the GPU's (one timed pass on this CPU, noisy: compare the "
                "memory, not the speed)")
    return None


def summary_table(lesson: Lesson, rs: ResultSet) -> Group:
    """Peaks, Δ vs the baseline, step times; the CUDA allocator's own peaks in a second table.
    Each table drops what it can spare at 80 columns (step time, peak phase) before a number
    would wrap."""
    results = rs.results
    base, bound = baseline_of(results), reached_baseline(results)
    all_ok = all(r.ok for r in results)
    cols = [Col("variant", key=True), Col("status", drop=2 if all_ok else 0),
            Col("peak", "right", numeric=True), Col("Δ vs baseline", "right", numeric=True,
                                                    short="Δ"),
            Col("peak phase", drop=3), Col("step time", "right", numeric=True, short="step",
                                           drop=4)]
    rows = [[Text(r.variant, style=f"bold {color(lesson, r.variant)}"), status_text(r.status),
             peak_text(r), delta_text(r, base, bound), r.peak.phase or "—", step_text(r)]
            for r in results]
    notes = []
    if base is None and bound is not None:
        notes.append("the baseline ran out of memory: Δ is against what it reached (≤: at least "
                     "that much less)")
    elif base is None and any(r.variant == "baseline" for r in results):
        notes.append("the baseline did not finish: no Δ to compare with")
    cpu = cpu_timing_note(results)
    if cpu:
        notes.append(cpu)
    parts = [FitTable(f"Peak per variant — {rs.source.short}", cols, rows,
                      caption="; ".join(notes) or None)]
    if any(r.allocator for r in results):
        a_cols = [Col("variant", key=True), Col("tensors", "right", numeric=True),
                  Col("allocated", "right", numeric=True, short="alloc."),
                  Col("reserved", "right", numeric=True, short="resv.")]
        a_rows = [[Text(r.variant, style=color(lesson, r.variant)), peak_text(r),
                   size(r.allocator.peak_allocated_bytes), size(r.allocator.peak_reserved_bytes)]
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
            measured = Text(size(c.measured_bytes))
            if c.expected_bytes == 0:
                good = c.measured_bytes == 0
                mark = Text("✔ match" if good else f"{size_delta(c.measured_bytes)} more",
                            style="green" if good else "yellow")
            else:
                good = abs(c.ratio - 1) <= 0.01
                mark = Text("✔ match" if good else f"×{c.ratio:.3f}",
                            style="green" if good else "yellow")
        table_rows.append([c.name, Text(r.variant, style=color(lesson, r.variant)),
                           size(c.expected_bytes), measured, mark])
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
    base = baseline_of(rs.results)
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
        row = [key[0], size(b.peak_bytes) if b else Text("—", style="dim")]
        for r, phases in zip(others, by_phase[1:]):
            p = phases.get(key)
            if p is None:
                row.append(Text("not reached" if r.status == "oom" else "—", style="dim"))
            elif b is None:
                row.append(Text(size(p.peak_bytes), style="dim"))
            else:
                d = p.peak_bytes - b.peak_bytes
                row.append(Text(size_delta(d), style="green" if d < 0 else "red" if d > 0 else "dim"))
        rows.append(row)
    cat_rows = []
    for cat in CATEGORIES:
        values = [r.peak.by_category.get(cat, 0) for r in [base, *others]]
        if not any(values):
            continue
        row = [Text(cat.replace("_", " "), style=category_color(cat)), size(values[0])]
        for r, v in zip(others, values[1:]):
            if not r.ok:
                row.append(Text("—", style="dim"))
                continue
            d = v - values[0]
            row.append(Text(size_delta(d), style="green" if d < 0 else "red" if d > 0 else "dim"))
        cat_rows.append(row)
    return Group(
        FitTable(f"What each technique changed, phase by phase (peak in the phase) — "
                 f"{rs.source.short}", columns("phase"), rows),
        Text(""),
        FitTable("…and category by category, at each variant's peak", columns("category"),
                 cat_rows))


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
        elif not (r.ok and other.ok) or not other.peak.bytes:
            diff = Text("—", style="dim")
        else:
            d = r.peak.bytes - other.peak.bytes
            diff = Text(f"{size_delta(d)} ({percent(d / other.peak.bytes)})")
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
        vs = size_delta(r.peak.bytes - h.peak_bytes) if r and r.ok and h.status == "ok" else "—"
        rows.append([h.created.replace("T", " ")[:16],
                     Text(h.variant, style=color(lesson, h.variant)), f"{h.mode}/{h.scale}",
                     status_text(h.status), size(h.peak_bytes) if h.status == "ok" else "—", vs,
                     seconds(h.step_time_s)])
    return FitTable("Your earlier runs of this lesson, newest first", cols, rows)


def failure_box(r: RunResult, source: Source) -> Text:
    where = f" ({source.short})"
    if r.status == "oom":
        t = Text("⚠ Out of memory — ", style="bold red")
        t.append(f"{r.variant} did not fit{where}. ", style="bold")
        t.append("This is a result, not a bug: the timeline stops at the allocation that failed "
                 "(✕ on the plot). Try a bigger GPU, or a variant that lowers the peak.\n")
        t.append(r.error or "", style="red")
        return t
    if r.status == "cancelled":
        return Text(f"■ {r.variant}: cancelled{where} — the timeline shows what streamed before "
                    "the stop.", style="yellow")
    if r.status == "timeout":
        return Text(f"⏱ {r.variant}{where}: {r.error}", style="yellow")
    t = Text(f"✘ {r.variant} failed{where} — ", style="bold red")
    t.append(r.error or "unknown error")
    return t


__all__ = ["ResultSet", "baseline_of", "beside_table", "check_notes", "checks_table", "color",
           "cpu_timing_note", "delta_text", "diff_tables", "failure_box", "history_table",
           "peak_text", "status_text", "summary_table", "variant_index", "versus_table"]
