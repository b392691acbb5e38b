"""Plain-text reports for `memlab run`: the tables (its timeline plot is lab.text_plots').

Every number goes through lab.report (one unit policy, one Δ rule) and says where it came from:
the learner's run ("simulated (full scale, torch 2.13)", "your CPU (small scale)", "your GPU
(…)") and, beside it, the H200 recording of the same variant with the measured difference.
Torch-free, and headless: no plotting library (lab.text_plots draws the timeline beside it).
"""

from __future__ import annotations

from typing import Iterable, Mapping

from lab.course.curriculum import Lesson
from lab.measure.result import RunResult
from lab.report import (allocator_line, DASH, capacity, checks_table, comparison_table, delta_text,
                        format_bytes, metric, peak_text, provenance, provenance_of, result_rows,
                        row_of, seconds, status_text, step_text, table, with_deltas)
from lab.report.provenance import recorded_on
from lab.report.rows import delta_note, reference_cells

References = Mapping[str, RunResult]  # variant -> the recorded run (assets/reference)



def _failed_phase(r: RunResult) -> str | None:
    return r.phases[-1].name if r.phases and not r.ok else None


def variant_report(r: RunResult, said: Iterable[str] = ()) -> str:
    """One variant's numbers; its notes less those in `said` (said once above, for all)."""
    out = [f"── {r.variant} ── {status_text(r.status)} · {provenance(r)}"]
    if r.error:
        out.append(f"   {r.error}")  # PyTorch's own message, quoted as it is
    if r.phases:
        cuda = any(p.allocated_delta_bytes is not None for p in r.phases)
        headers = ["phase", "Δ tensors", "live at end", "peak in phase"]
        if cuda:
            headers += ["Δ allocator", "reserved"]
        failed = _failed_phase(r)
        rows = []
        for p in r.phases:
            name = p.name + (f"  ✗ {status_text(r.status)} here" if p.name == failed else "")
            row = [name, format_bytes(p.delta_bytes), format_bytes(p.end_bytes),
                   format_bytes(p.peak_bytes)]
            if cuda:
                row += [format_bytes(p.allocated_delta_bytes), format_bytes(p.reserved_bytes)]
            rows.append(row)
        out.append(table(headers, rows, right=set(range(1, len(headers)))))
    if r.peak.bytes or r.ok:
        where = "peak" if r.ok else f"live when it stopped ({status_text(r.status)})"
        out.append(f"\n{where}: {format_bytes(r.peak.bytes)} during '{r.peak.phase or DASH}'")
        cats = sorted(r.peak.by_category.items(), key=lambda kv: -kv[1])
        if cats:
            out.append(table(["live there", "bytes"], [[c, format_bytes(n)] for c, n in cats],
                             right={1}))
    if r.allocator:
        a = r.allocator
        out.append(allocator_line(a))
    if r.checks:
        out.append("\n" + checks_table(r.checks, r.status))
        out += [f"   {c.name}: {c.note}" for c in r.checks if c.note]
    if r.step_time_s is not None:
        out.append(f"step time {seconds(r.step_time_s)} (untracked pass)")
    if r.metrics:
        out.append("metrics: " + ", ".join(f"{k} = {metric(k, v)}" for k, v in r.metrics.items()))
    if len(r.ranks) > 1:  # torch.distributed: the numbers above are rank 0's; each rank's own
        out.append(f"ranks ({len(r.ranks)}, one process each): " + "; ".join(
            f"{i}: {status_text(x.status)} peak {format_bytes(x.peak.bytes)}"
            + (f", allocated {format_bytes(x.allocator.peak_allocated_bytes)}" if x.allocator else "")
            for i, x in enumerate(r.ranks)))
    out += [f"note: {n}" for n in r.notes if n not in said]
    return "\n".join(out)


def shared_notes(results: list[RunResult]) -> list[str]:
    """The notes every one of several results carries (sim's version notes): said once."""
    if len(results) < 2:
        return []
    return [n for n in results[0].notes if all(n in r.notes for r in results[1:])]


def _ref_rows(results: list[RunResult], references: References | None) -> dict:
    if not references:
        return {}
    wanted = {r.variant for r in results}
    recorded = [ref for v, ref in references.items() if v in wanted]
    return {row.name: row for row in with_deltas([row_of(ref) for ref in recorded])}


def _recording_label(references: References | None) -> str:
    refs = list((references or {}).values())
    return provenance_of(refs, recorded=True) if refs else ""


def comparison(results: list[RunResult], references: References | None = None) -> str:
    """The lesson's variants side by side (Δ vs the `baseline` variant), and the recording."""
    refs = _ref_rows(results, references)
    rows = result_rows(results)
    note = delta_note(rows)  # a baseline that stopped: what its Δ column means
    return comparison_table(rows, refs or None, reference_label=_ref_name(references)) + (
        f"\n{note}" if note else "")


def _ref_name(references: References | None) -> str:
    """The card the recordings ran on, read from them ('H200', 'H100', 'H200/H100')."""
    return recorded_on((references or {}).values())


def _on(results) -> str:
    """', on a virtual GPU of 17.18 GB (16 GiB)' (the cap the runs had: --gpu-memory, or the
    lesson's own), ', on the whole GPU' for recordings without one, '' for uncapped cpu/sim."""
    caps = sorted({getattr(r.device, "virtual_bytes", None) for r in results} - {None})
    if caps:
        return ", on a virtual GPU of " + " / ".join(capacity(c) for c in caps)
    return ", on the whole GPU" if any(r.on_gpu for r in results) else ""


def source_lines(results: list[RunResult], references: References | None = None,
                 gpu_memory: int | None = None, version_note: str | None = None) -> list[str]:
    """Where the numbers came from, said once above the tables. (`gpu_memory` is kept for
    callers; the cap shown is the one the results record.)"""
    lines = [f"numbers: {provenance_of(results)}{_on(results)}"]
    shown = [r for v, r in (references or {}).items() if v in {x.variant for x in results}]
    if shown:
        lines.append(f"{_ref_name(references)} columns: "
                     f"{provenance_of(shown, recorded=True)}{_on(shown)}")
    if version_note:
        lines.append(f"note: {version_note}")
    return lines


def step_series(xs: list[int], ys: list[int]) -> tuple[list[float], list[int]]:
    """Memory is a step function: hold each value until the next event, and start from 0."""
    if not xs:
        return [], []
    out_x, out_y = [xs[0] - 1], [0]
    for x, y in zip(xs, ys):
        out_x += [x, x]
        out_y += [out_y[-1], y]
    return out_x, out_y


def lesson_report(lesson: Lesson, results: list[RunResult], references: References | None = None,
                  gpu_memory: int | None = None, version_note: str | None = None) -> str:
    shared = shared_notes(results)
    parts = [f"\n{lesson.key} · {lesson.title}",
             *source_lines(results, references, gpu_memory, version_note),
             *(f"note (every variant): {n}" for n in shared), ""]
    parts += [variant_report(r, shared) + "\n" for r in results]
    if len(results) > 1 or references:
        parts.append(comparison(results, references) + "\n")
    return "\n".join(parts)


def summary_table(results: list[RunResult], references: Mapping[str, References] | None = None,
                  gpu_memory: int | None = None) -> str:
    """`memlab run --all`: one row per variant, Δ vs each lesson's baseline, and the recording."""
    references = references or {}
    by_lesson: dict[str, list[RunResult]] = {}
    for r in results:
        by_lesson.setdefault(r.lesson, []).append(r)
    body = []
    for lesson, rs in by_lesson.items():
        refs = _ref_rows(rs, references.get(lesson))
        for r, row in zip(rs, result_rows(rs)):
            wall = DASH if r.wall_s is None else seconds(r.wall_s)
            body.append([lesson, r.variant, status_text(r.status), peak_text(row),
                         delta_text(row),
                         step_text(row), wall,
                         *reference_cells(row, refs.get(r.variant))])
    recorded = [ref for refs in references.values() for ref in refs.values()]
    card = recorded_on(recorded)  # the cards they ran on (lesson 27: an H100)
    headers = ["lesson", "variant", "status", "peak", "Δ vs baseline", "step", "wall",
               f"{card} peak (recorded)", f"vs {card}"]
    lines = [f"numbers: {provenance_of(results)}"
             + (f", on a virtual GPU of {capacity(gpu_memory)}" if gpu_memory else "")]
    if recorded:
        capped = sorted({(r.lesson, r.device.virtual_bytes) for r in recorded
                         if r.device.virtual_bytes})
        lines.append(f"{card} columns: {provenance_of(recorded, recorded=True)}"
                     + "".join(f"; {lesson} on a virtual GPU of {capacity(cap)}"
                               for lesson, cap in capped))
    return "\n".join(lines + ["", table(headers, body, right={3, 4, 5, 6, 7, 8})])


__all__ = ["comparison", "lesson_report", "source_lines", "step_series", "summary_table",
           "variant_report"]
