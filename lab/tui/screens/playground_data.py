"""The playground screen's only door into the workload layer (`lab.workloads`).

Listing the workloads and parsing combinations is torch-free and instant; running them goes
through the runner (workers import torch, never this process). Nothing here touches Textual.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from lab.measure.result import RunResult


@dataclass(frozen=True)
class WorkloadInfo:
    name: str
    title: str
    sizes: dict[str, dict[str, Any]]  # scale -> default sizes
    unit: str  # throughput unit: tokens or samples
    notes: tuple[str, ...] = ()


@dataclass
class Catalog:
    workloads: dict[str, WorkloadInfo] = field(default_factory=dict)
    tokens_help: str = ""


def load_catalog() -> Catalog:
    """Every workload and the combination tokens (torch-free: the registry is metadata)."""
    from lab.workloads import TOKENS, all_workloads

    infos = {w.name: WorkloadInfo(w.name, w.title, {s: w.default_sizes(s) for s in w.sizes},
                                  w.unit, tuple(w.notes))
             for w in all_workloads().values()}
    # the memory techniques first (what the playground is for), then the optimizer choices
    first = ("", "precision", "checkpointing", "accum", "set_to_none", "eval")
    order = sorted(TOKENS, key=lambda t: (t.kind not in first, first.index(t.kind)
                                          if t.kind in first else 0))
    names = ", ".join(t.name for t in order)
    return Catalog(infos, f"{names} — joined with '+', e.g. bf16+ckpt+accum4")


def make_plan(workload: str, mode: str, sizes: dict[str, int], combos: list[str],
              scale: str | None = None):
    """The comparison the form describes, at `scale` (default: the mode's own, from the mode
    table). Raises ValueError (incl. ComboError) or KeyError with one line."""
    from lab.measure.modes import default_scale
    from lab.playground import ComparePlan
    from lab.workloads import get_workload, parse_combos

    w = get_workload(workload)
    scale = scale or default_scale(mode)
    plan_sizes = w.default_sizes(scale)
    for key, value in sizes.items():
        if key not in plan_sizes:
            raise ValueError(f"workload {w.name!r} has no {key}")
        if value < 1:
            raise ValueError(f"{key} must be at least 1")
        plan_sizes[key] = value
    configs = parse_combos(combos or ["baseline"])
    for cfg in configs:
        w.check(cfg, plan_sizes)  # ComboError (a ValueError): unsupported, or batch % accum
    return ComparePlan(w.name, plan_sizes, configs, mode, scale)


def labels(plan) -> list[str]:
    return [c.label for c in plan.combos]


def run(plan, runner, on_event: Callable[[str, dict], None], cancel,
        on_result: Callable[[RunResult], None]):
    """Every combination in turn, each in its own worker; returns the comparison."""
    from lab.playground.compare import run_compare

    return run_compare(plan, runner, on_event=on_event, cancel=cancel, on_result=on_result)


def rows(plan, catalog: Catalog, results: list[RunResult]) -> list:
    """One row per result: combo, status, peak_bytes, delta_bytes, delta_frac, step_time_s,
    throughput, unit, error (the compare layer's `Row`)."""
    from lab.playground.compare import rows_for
    from lab.workloads import get_workload

    w = get_workload(plan.workload)
    return rows_for(results, w.items_per_step(plan.sizes), w.unit)


def draw_tradeoff(plt, rows_) -> None:
    from lab.text_plots import draw_tradeoff as draw

    draw(plt, rows_)


__all__ = ["Catalog", "WorkloadInfo", "draw_tradeoff", "labels", "load_catalog", "make_plan",
           "rows", "run"]
