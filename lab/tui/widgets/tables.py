"""The results tab's tables: peaks, checks, what each technique changed, the recording vs
your own run, the run history. Rich renderables built from results, nothing else.

Every table names where its numbers came from (`provenance.Source`). Sizes go through
`look.size` / `look.size_delta` (lab.report.units). A value that was never reached (an OOM
stopped the run first) says so instead of showing a measured zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from lab.curriculum import Lesson
from lab.measure.result import RunResult
from lab.measure.trace import CATEGORIES
from lab.progress import RunRecord

from ..align import merge_orders, phase_keys
from ..look import (STATUS_LABEL, STATUS_STYLE, category_color, percent, seconds, size,
                    size_delta, variant_color)
from ..provenance import LIVE, Source, source_of


@dataclass
class ResultSet:
    """Results of one origin (the H200 recording, or one run on this machine)."""

    results: list[RunResult] = field(default_factory=list)
    how: str = LIVE  # provenance.RECORDING | provenance.LIVE

    @property
    def source(self) -> Source | None:
        return source_of(self.results[0], self.how) if self.results else None

    def get(self, variant: str) -> RunResult | None:
        return next((r for r in self.results if r.variant == variant), None)

    def __bool__(self) -> bool:
        return bool(self.results)


def variant_index(lesson: Lesson, variant: str) -> int:
    names = [v.name for v in lesson.variants]
    return names.index(variant) if variant in names else len(names)


def color(lesson: Lesson, variant: str) -> str:
    return variant_color(variant_index(lesson, variant))


def status_text(status: str) -> Text:
    return Text(STATUS_LABEL.get(status, status), style=STATUS_STYLE.get(status, ""))


def _table(title: str) -> Table:
    # the title goes above as its own line (`titled`): a Rich title wraps to the table's width
    t = Table(header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
    t.heading = title
    return t


def titled(*tables) -> Group:
    parts = []
    for t in tables:
        if isinstance(t, Table) and getattr(t, "heading", ""):
            parts.append(Text(t.heading, style="bold"))
        parts.append(t)
    return Group(*parts)


def peak_text(r: RunResult) -> Text:
    if r.ok:
        return Text(size(r.peak.bytes))
    if r.status == "oom" and r.peak.bytes:
        return Text(f"≥{size(r.peak.bytes)}", style="red")  # it needed more than it reached
    return Text("—", style="dim")


def baseline_of(results: list[RunResult]) -> RunResult | None:
    return next((r for r in results if r.variant == "baseline" and r.ok), None)


def summary_table(lesson: Lesson, rs: ResultSet) -> Group:
    """Peaks, Δ vs the baseline, step times; the CUDA allocator's own peaks in a second table
    (so neither is squeezed into cut numbers at 80 columns)."""
    results, base = rs.results, baseline_of(rs.results)
    t = _table(f"Peak per variant — {rs.source.short}")
    t.add_column("variant", overflow="fold")
    t.add_column("status")
    t.add_column("peak", justify="right", no_wrap=True)
    t.add_column("Δ vs baseline", justify="right", no_wrap=True)
    t.add_column("peak phase", overflow="fold")
    t.add_column("step time", justify="right", no_wrap=True)
    for r in results:
        if r is base:
            delta = Text("(baseline)", style="dim")
        elif base is None or not r.ok:
            delta = Text("—", style="dim")
        else:
            d = r.peak.bytes - base.peak.bytes
            pct = f" ({percent(d / base.peak.bytes)})" if base.peak.bytes else ""
            delta = Text(size_delta(d) + pct, style="green" if d < 0 else "red" if d > 0 else "")
        step = seconds(r.step_time_s) if r.step_time_s is not None else (
            "none (sim)" if r.mode == "sim" else "—")
        t.add_row(Text(r.variant, style=f"bold {color(lesson, r.variant)}"), status_text(r.status),
                  peak_text(r), delta, r.peak.phase or "—", step)
    if base is None and any(r.variant == "baseline" for r in results):
        t.caption = "the baseline did not finish: no Δ to compare with"
    parts = [t]
    if any(r.allocator for r in results):
        a = _table("The CUDA caching allocator's own peaks (its blocks: rounding and "
                   "workspaces included)")
        a.add_column("variant", overflow="fold")
        a.add_column("tensors", justify="right", no_wrap=True)
        a.add_column("allocated", justify="right", no_wrap=True)
        a.add_column("reserved", justify="right", no_wrap=True)
        for r in results:
            if r.allocator:
                a.add_row(Text(r.variant, style=color(lesson, r.variant)), peak_text(r),
                          size(r.allocator.peak_allocated_bytes),
                          size(r.allocator.peak_reserved_bytes))
        parts.append(a)
    return titled(*parts)


def checks_table(lesson: Lesson, rs: ResultSet) -> Group | None:
    rows = [(r, c) for r in rs.results for c in r.checks]
    if not rows:
        return None
    phase_of = {c["name"]: c["phase"] for c in lesson.checks}
    t = _table(f"Expected vs measured — {rs.source.short}")
    t.add_column("check")
    t.add_column("variant", no_wrap=True)
    t.add_column("expected", justify="right", no_wrap=True)
    t.add_column("measured", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    notes = []
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
            if c.note and (c.name, c.note) not in notes:
                notes.append((c.name, c.note))
        t.add_row(c.name, Text(r.variant, style=color(lesson, r.variant)),
                  size(c.expected_bytes), measured, mark)
    if not notes:
        return titled(t)
    return titled(t, Text("\n".join(f"• {n}: {note}" for n, note in notes[:6]), style="dim"))


def _phase_peaks(r: RunResult) -> dict:
    return dict(zip(phase_keys([(p.name, 0) for p in r.phases]), r.phases))


def diff_tables(lesson: Lesson, rs: ResultSet) -> Group | None:
    """Per phase and per category: what each variant changed against the baseline."""
    base = baseline_of(rs.results)
    others = [r for r in rs.results if r is not base and r.phases]
    if base is None or not others:
        return None
    by_phase = [_phase_peaks(r) for r in [base, *others]]
    order = merge_orders([list(p) for p in by_phase])
    t = _table(f"What each technique changed, phase by phase (peak in the phase) — "
               f"{rs.source.short}")
    t.add_column("phase", no_wrap=True)
    t.add_column("baseline", justify="right", no_wrap=True)
    for r in others:
        t.add_column(Text(f"Δ {r.variant}", style=color(lesson, r.variant)), justify="right",
                     overflow="fold")
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
        t.add_row(*row)
    c = _table("…and category by category, at each variant's peak")
    c.add_column("category", no_wrap=True)
    c.add_column("baseline", justify="right", no_wrap=True)
    for r in others:
        c.add_column(Text(f"Δ {r.variant}", style=color(lesson, r.variant)), justify="right",
                     overflow="fold")
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
        c.add_row(*row)
    return titled(t, c)


def beside_table(lesson: Lesson, lead: ResultSet, beside: ResultSet) -> Group:
    """The other origin next to the lead one, variant by variant, with their difference."""
    t = _table(f"{beside.source.short} beside {lead.source.short}")
    t.add_column("variant", no_wrap=True)
    t.add_column(beside.source.short, justify="right", no_wrap=True)
    t.add_column(lead.source.short, justify="right", no_wrap=True)
    t.add_column("difference", justify="right", no_wrap=True)
    for r in beside.results:
        other = lead.get(r.variant)
        if other is None:
            diff = Text("—", style="dim")
        elif r.scale != other.scale:
            diff = Text(f"{r.scale} vs {other.scale} scale: compare shapes", style="dim")
        elif not (r.ok and other.ok) or not other.peak.bytes:
            diff = Text("—", style="dim")
        else:
            d = r.peak.bytes - other.peak.bytes
            diff = Text(f"{size_delta(d)} ({percent(d / other.peak.bytes)})")
        t.add_row(Text(r.variant, style=color(lesson, r.variant)), peak_text(r),
                  peak_text(other) if other else Text("—", style="dim"), diff)
    return titled(t)


def history_table(lesson: Lesson, history: list[RunRecord],
                  current: list[RunResult]) -> Group | None:
    # earlier runs of this lesson, newest first, compared with the same variant/mode/scale now
    now = {(r.variant, r.mode, r.scale): r for r in current}
    older = list(reversed(history))[:8]
    if not older:
        return None
    t = _table("Your earlier runs of this lesson, newest first")
    for name, just in (("when", "left"), ("variant", "left"), ("mode", "left"),
                       ("status", "left"), ("peak", "right"), ("vs now", "right"),
                       ("step time", "right")):
        t.add_column(name, justify=just, no_wrap=True)
    for h in older:
        r = now.get((h.variant, h.mode, h.scale))
        vs = size_delta(r.peak.bytes - h.peak_bytes) if r and r.ok and h.status == "ok" else "—"
        t.add_row(h.created.replace("T", " ")[:16], Text(h.variant, style=color(lesson, h.variant)),
                  f"{h.mode}/{h.scale}", status_text(h.status),
                  size(h.peak_bytes) if h.status == "ok" else "—", vs, seconds(h.step_time_s))
    return titled(t)


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


__all__ = ["ResultSet", "baseline_of", "beside_table", "checks_table", "color", "diff_tables",
           "failure_box", "history_table", "peak_text", "status_text", "summary_table",
           "variant_index"]
