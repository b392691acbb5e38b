"""Comparison and fit tables as plain text or Markdown (headless: the plots live in lab.report.export).

Units, tables and the Δ-vs-baseline rule are lab.report's (compare: the first combination is
the baseline); this module only chooses the columns.
"""

from __future__ import annotations

from types import SimpleNamespace

from lab.measure.modes import mode_info
from lab.report import (DASH, FIRST, Row, delta_text, format_bytes, number, peak_text,
                        provenance, provenance_of, status_text, step_text, table, with_deltas)
from lab.report.units import seconds
from lab.workloads.fit import FitResult

from .compare import Comparison

# lab.tui still imports this name; the `app` branch moves it to lab.report.format_bytes
gb = format_bytes


def _rows(c: Comparison) -> list[Row]:
    return with_deltas([Row(r.combo, r.status, r.peak_bytes, step_time_s=r.step_time_s,
                            mode=c.mode, scale=c.scale) for r in c.rows], rule=FIRST)


def comparison_table(c: Comparison, markdown: bool = False) -> str:
    cuda = any(r.allocator_peak_bytes is not None for r in c.rows)
    headers = ["combination", "status", "peak", "Δ vs baseline", "step time", f"{c.unit}/s"]
    if cuda:
        headers += ["allocator peak", "reserved peak"]
    body = []
    for r, row in zip(c.rows, _rows(c)):
        cells = [r.combo, status_text(r.status), peak_text(row), delta_text(row), step_text(row),
                 number(r.throughput, digits=3) if r.throughput is not None else DASH]
        if cuda:
            cells += [format_bytes(r.allocator_peak_bytes), format_bytes(r.reserved_peak_bytes)]
        body.append(cells)
    out = table(headers, body, right=set(range(2, len(headers))), markdown=markdown)
    errors = [f"{r.combo}: {r.error}" for r in c.rows if r.error]
    # sim beyond the rank counts measured on GPUs says so (lab/measure/distributed.py)
    errors += sorted({n for r in c.results for n in r.notes if "extrapolation" in n})
    if errors:
        out += "\n" + "\n".join(("- " if markdown else "  ") + e for e in errors)
    return out


def comparison_source(c: Comparison) -> str:
    """Where the comparison's numbers came from (its results, or its mode when they are gone)."""
    if c.results:
        return provenance_of(c.results)
    info = mode_info(c.mode)
    return provenance(SimpleNamespace(mode=c.mode, scale=c.scale, torch_version="",
                                      on_gpu=info.on_gpu, simulated=info.simulated,
                                      device=SimpleNamespace(name="CUDA GPU")))


def comparison_header(c: Comparison) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in c.sizes.items())
    timed = ("step time from an untracked pass" if mode_info(c.mode).timed
             else "sim: exact bytes, no timings")
    ranks = (f" · ddp/zero1/fsdp on {c.gpus} ranks, one GPU (or CPU process) each: peak per "
             f"rank (rank 0's), {c.unit}/s per rank" if getattr(c, "gpus", 1) > 1 else "")
    return f"{c.workload} · {comparison_source(c)} · {sizes} · {timed}{ranks}"


def fit_table(results: list[FitResult], markdown: bool = False) -> str:
    """Per combination: the largest batch, its predicted max allocated and max reserved (what
    the limit counts), the margin left, what one more micro-batch would reserve, and the work
    (batches simulated for real, the answer and the one after it among them, of the batches
    asked about; the others are replays of the line)."""
    confirmed = any(r.cuda_status is not None for r in results)
    headers = ["combination", "largest batch", "max allocated", "max reserved", "margin",
               "one more reserves", "sim runs / batches", "time"]
    if confirmed:
        headers += ["CUDA", "CUDA reserved", "CUDA margin"]
    rows = []
    for r in results:
        if r.status == "ok":
            batch = (f"{r.batch:,}" if r.batch == r.micro_batch
                     else f"{r.batch:,} ({r.micro_batch:,} × accum)")
            if r.capped:
                batch = "≥ " + batch
        else:
            batch = {"none-fits": "none fits", "error": "error"}.get(r.status, r.status)
        row = [r.combo, batch, format_bytes(r.peak_bytes), format_bytes(r.reserved_bytes),
               format_bytes(r.margin_bytes), format_bytes(r.next_peak_bytes),
               f"{r.sim_runs} / {r.probes}", seconds(r.seconds)]
        if confirmed:
            cuda = DASH if r.cuda_status is None else (
                f"ok at {r.cuda_micro_batch:,}" if r.cuda_status == "ok" else r.cuda_status)
            row += [cuda, format_bytes(r.cuda_reserved_bytes), format_bytes(r.cuda_margin_bytes)]
        rows.append(row)
    out = table(headers, rows, right=set(range(1, len(headers))), markdown=markdown)
    notes = [f"{r.combo}: {n}" for r in results for n in r.notes] + \
        [f"{r.combo}: {r.error}" for r in results if r.error]
    if notes:
        out += "\n" + "\n".join(("- " if markdown else "  ") + n for n in notes)
    return out


__all__ = ["comparison_header", "comparison_source", "comparison_table", "fit_table", "gb"]
