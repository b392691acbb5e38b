"""Plain-text reports for `memlab run` (tables + a plotext timeline).

Not part of the headless core: plotext is imported lazily and the report still prints (without
the plot) where plotext is missing, e.g. on a GPU box that has only torch.
"""

from __future__ import annotations

import shutil

from lab.curriculum import Lesson
from lab.measure.device import format_bytes
from lab.measure.result import RunResult

GB = 1e9
_UNIT = {"div": GB, "name": "GB"}


def use_unit_for(results: list[RunResult]) -> None:
    """GB (10⁹, the seeds' unit) for seed-scale runs; MB when everything is small."""
    peak = max((r.peak.bytes for r in results), default=0)
    _UNIT.update(div=GB, name="GB") if peak >= 0.1 * GB else _UNIT.update(div=1e6, name="MB")


def _gb(n: int | None) -> str:
    return "—" if n is None else f"{n / _UNIT['div']:,.3f} {_UNIT['name']}"


def _table(headers: list[str], rows: list[list[str]], right: set[int] | None = None) -> str:
    right = right if right is not None else set(range(1, len(headers)))
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def fmt(row):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths)))
    return "\n".join([fmt(headers), "  ".join("─" * w for w in widths)] + [fmt(r) for r in rows])


def variant_report(r: RunResult) -> str:
    out = [f"── {r.variant} · {r.mode} · {r.scale} · {r.device.name} ── status: {r.status}"]
    if r.error:
        out.append(f"   {r.error}")
    if r.phases:
        cuda = any(p.allocated_delta_bytes is not None for p in r.phases)
        headers = ["phase", "Δ tensors", "live at end", "peak in phase"]
        if cuda:
            headers += ["Δ allocator", "reserved"]
        rows = []
        for p in r.phases:
            row = [p.name, _gb(p.delta_bytes), _gb(p.end_bytes), _gb(p.peak_bytes)]
            if cuda:
                row += [_gb(p.allocated_delta_bytes), _gb(p.reserved_bytes)]
            rows.append(row)
        out.append(_table(headers, rows))
    out.append(f"\npeak {_gb(r.peak.bytes)} during '{r.peak.phase or '—'}'; live there:")
    for cat, n in sorted(r.peak.by_category.items(), key=lambda kv: -kv[1]):
        out.append(f"   {cat:<16} {_gb(n):>14}")
    if r.allocator:
        a = r.allocator
        out.append(f"CUDA allocator: peak allocated {_gb(a.peak_allocated_bytes)}, peak reserved "
                   f"{_gb(a.peak_reserved_bytes)}, nvidia-smi (NVML) {_gb(a.nvml_used_bytes)}")
    if r.checks:
        rows = [[c.name, f"{c.expected_bytes:,}", f"{c.measured_bytes:,}", f"{c.ratio:.4f}", c.source]
                for c in r.checks]
        out.append("\n" + _table(["check", "expected B", "measured B", "ratio", "measured by"], rows,
                                 right={1, 2, 3}))
        out += [f"   {c.name}: {c.note}" for c in r.checks if c.note]
    if r.step_time_s is not None:
        out.append(f"step time {r.step_time_s * 1000:.1f} ms (untracked pass)")
    if r.metrics:
        out.append("metrics: " + ", ".join(f"{k}={v:.6g}" for k, v in r.metrics.items()))
    for n in r.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


def comparison(results: list[RunResult]) -> str:
    base = next((r for r in results if r.variant == "baseline" and r.ok), None)
    rows = []
    for r in results:
        delta = "—"
        if base is not None and r.ok and r is not base and base.peak.bytes:
            d = r.peak.bytes - base.peak.bytes
            delta = f"{_gb(d)} ({d / base.peak.bytes:+.0%})"
        step = "—" if r.step_time_s is None else f"{r.step_time_s * 1000:,.1f} ms"
        rows.append([r.variant, r.status, _gb(r.peak.bytes), r.peak.phase or "—", delta, step])
    return _table(["variant", "status", "peak", "peak phase", "Δ vs baseline", "step time"], rows,
                  right={2, 4, 5})


def step_series(xs: list[int], ys: list[int]) -> tuple[list[float], list[int]]:
    """Memory is a step function: hold each value until the next event, and start from 0."""
    if not xs:
        return [], []
    out_x, out_y = [xs[0] - 1], [0]
    for i, (x, y) in enumerate(zip(xs, ys)):
        out_x += [x, x]
        out_y += [out_y[-1], y]
    return out_x, out_y


def timeline_plot(results: list[RunResult], width: int | None = None, height: int = 18,
                  color: bool = False) -> str:
    try:
        import plotext as plt
    except ImportError:
        return "(install plotext to see the timeline)"
    width = width or min(120, shutil.get_terminal_size((100, 30)).columns)
    use_unit_for(results)
    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    for r in results:
        if r.timeline.index:
            xs, ys = step_series(r.timeline.index, r.timeline.live)
            plt.plot(xs, [b / _UNIT["div"] for b in ys], label=r.variant)
            if r.peak.index >= 0:
                plt.scatter([r.peak.index], [r.peak.bytes / _UNIT["div"]], marker="x")
    plt.title("live tensor memory over time")
    plt.xlabel("allocation #")
    plt.ylabel(_UNIT["name"])
    text = plt.build()
    return text if color else plt.uncolorize(text)


def lesson_report(lesson: Lesson, results: list[RunResult], color: bool = False) -> str:
    use_unit_for(results)
    parts = [f"\n{lesson.key} · {lesson.title}\n"]
    parts += [variant_report(r) + "\n" for r in results]
    if len(results) > 1:
        parts.append(comparison(results) + "\n")
    parts.append(timeline_plot(results, color=color))
    return "\n".join(parts)


def summary_table(results: list[RunResult]) -> str:
    use_unit_for(results)
    rows = []
    base_peak: dict[str, int] = {}
    for r in results:
        if r.variant == "baseline" and r.ok:
            base_peak[r.lesson] = r.peak.bytes
    for r in results:
        b = base_peak.get(r.lesson)
        delta = "—" if not b or r.variant == "baseline" or not r.ok else \
            f"{(r.peak.bytes - b) / b:+.0%}"
        step = "—" if r.step_time_s is None else f"{r.step_time_s * 1000:,.1f} ms"
        wall = "—" if r.wall_s is None else f"{r.wall_s:.1f} s"
        rows.append([r.lesson, r.variant, r.mode, r.status, _gb(r.peak.bytes), delta, step, wall])
    return _table(["lesson", "variant", "mode", "status", "peak", "Δ peak", "step", "wall"], rows,
                  right={4, 5, 6, 7})


__all__ = ["comparison", "format_bytes", "lesson_report", "summary_table", "timeline_plot",
           "variant_report"]
