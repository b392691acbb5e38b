"""Comparison and fit tables as plain text (headless: the plots live in lab.export)."""

from __future__ import annotations

from lab.workloads.fit import FitResult

from .compare import Comparison

GB = 1e9


def gb(n: int | float | None) -> str:
    """Display only: GB (10**9) for big numbers, MB/kB below (say which, as the lab does)."""
    if n is None:
        return "—"
    a = abs(n)
    if a >= 0.1 * GB:
        return f"{n / GB:,.3f} GB"
    if a >= 1e6:
        return f"{n / 1e6:,.2f} MB"
    if a >= 1e3:
        return f"{n / 1e3:,.1f} kB"
    return f"{int(n)} B"


def table(headers: list[str], rows: list[list[str]], right: set[int] | None = None,
          markdown: bool = False) -> str:
    right = right if right is not None else set(range(1, len(headers)))
    if markdown:
        def esc(c):
            return str(c).replace("|", "\\|")
        sep = ["---:" if i in right else "---" for i in range(len(headers))]
        lines = [headers, sep] + rows
        return "\n".join("| " + " | ".join(esc(c) for c in r) + " |" for r in lines)
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def fmt(row):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([fmt(headers), "  ".join("─" * w for w in widths)] + [fmt(r) for r in rows])


def _rate(v: float | None, unit: str) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f}" if v >= 100 else f"{v:,.2f}"


def comparison_table(c: Comparison, markdown: bool = False) -> str:
    cuda = any(r.allocator_peak_bytes is not None for r in c.rows)
    headers = ["combination", "status", "peak", "Δ vs baseline", "step time", f"{c.unit}/s"]
    if cuda:
        headers += ["allocator peak", "reserved peak"]
    rows = []
    for k, r in enumerate(c.rows):
        if k == 0:
            delta = "(baseline)"
        elif r.delta_bytes is None:
            delta = "—"
        else:
            sign = "+" if r.delta_bytes >= 0 else "-"
            delta = sign + gb(abs(r.delta_bytes)) + (f" ({r.delta_frac:+.0%})"
                                                     if r.delta_frac is not None else "")
        step = "—" if r.step_time_s is None else f"{r.step_time_s * 1000:,.1f} ms"
        row = [r.combo, r.status, gb(r.peak_bytes), delta, step, _rate(r.throughput, c.unit)]
        if cuda:
            row += [gb(r.allocator_peak_bytes), gb(r.reserved_peak_bytes)]
        rows.append(row)
    out = table(headers, rows, right=set(range(2, len(headers))), markdown=markdown)
    errors = [f"{r.combo}: {r.error}" for r in c.rows if r.error]
    if errors:
        out += "\n" + "\n".join(("- " if markdown else "  ") + e for e in errors)
    return out


def comparison_header(c: Comparison) -> str:
    sizes = ", ".join(f"{k}={v}" for k, v in c.sizes.items())
    timed = ("step time from an untracked pass" if c.mode != "sim"
             else "sim: exact bytes, no timings")
    return f"{c.workload} · {c.mode} · {c.scale} · {sizes} · {timed}"


def fit_table(results: list[FitResult], markdown: bool = False) -> str:
    confirmed = any(r.cuda_status is not None for r in results)
    headers = ["combination", "largest batch", "predicted peak", "margin", "one more needs",
               "probes"]
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
        row = [r.combo, batch, gb(r.peak_bytes), gb(r.margin_bytes), gb(r.next_peak_bytes),
               str(r.probes)]
        if confirmed:
            cuda = "—" if r.cuda_status is None else (
                f"ok at {r.cuda_micro_batch:,}" if r.cuda_status == "ok" else r.cuda_status)
            row += [cuda, gb(r.cuda_reserved_bytes), gb(r.cuda_margin_bytes)]
        rows.append(row)
    out = table(headers, rows, right=set(range(1, len(headers))), markdown=markdown)
    notes = [f"{r.combo}: {n}" for r in results for n in r.notes] + \
        [f"{r.combo}: {r.error}" for r in results if r.error]
    if notes:
        out += "\n" + "\n".join(("- " if markdown else "  ") + n for n in notes)
    return out


__all__ = ["comparison_header", "comparison_table", "fit_table", "gb", "table"]
