"""`memlab compare`: one workload, several technique combinations, each in its own worker.

    plan = ComparePlan("mlp", sizes, [parse_combo("baseline"), parse_combo("bf16+ckpt")], "cpu")
    comparison = run_compare(plan, SubprocessRunner())
    comparison.rows    # peak, Δ vs baseline, step time, tokens/s

The first combination is the baseline. Every combination is a RunRequest for the workload
layer's generic experiment (lab/workloads/experiment.py, variant "combo"), so it gets the same
fresh process, timeout, cancel and OOM-as-a-result handling as a lesson. Each result's params
name the combination (`config`) and the optimizer it trained with (`optimizer`: class,
settings, state bytes per parameter). Headless: no torch here.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from lab.measure.modes import mode_info
from lab.measure.result import RunResult
from lab.report.rows import FIRST, row_of, with_deltas
from lab.runner.protocol import RunRequest
from lab.workloads import EXPERIMENT, VARIANT, TrainConfig, optimizer_info
from lab.workloads.registry import workload_for

LABEL = "playground"  # the results' `lesson`
SCHEMA = 1


@dataclass
class ComparePlan:
    workload: str
    sizes: dict[str, Any]
    combos: list[TrainConfig]
    mode: str = "cpu"  # resolved: cuda | cpu | sim
    scale: str = "small"
    gpu_memory: int | None = None
    timing: bool = True
    timeout_s: float = 600.0
    profile_dir: str | None = None  # cuda: one profile-<combo>.pkl per combination
    # ranks of the data-parallel combinations (ddp, zero1, fsdp): one GPU each on cuda, one
    # process each on cpu (gloo), simulated in one process in sim; the others run on one GPU
    gpus: int = 1

    def requests(self) -> list[RunRequest]:
        w = workload_for(self.workload, self.sizes)  # registered, or a --config file
        out = []
        for cfg in self.combos:
            w.check(cfg, self.sizes)
            profile = (str(Path(self.profile_dir) / f"profile-{cfg.label}.pkl")
                       if self.profile_dir else None)
            out.append(RunRequest(LABEL, VARIANT, self.mode, self.scale, kind="experiment",
                                  experiment=EXPERIMENT,
                                  params=run_params(self.workload, self.sizes, cfg, self.gpus),
                                  gpu_memory=self.gpu_memory, profile_path=profile,
                                  timing=self.timing and mode_info(self.mode).timed,
                                  timeout_s=self.timeout_s,
                                  ranks=worker_ranks(cfg, self.mode, self.gpus)))
        return out


def run_params(workload: str, sizes: dict[str, Any], cfg: TrainConfig,
               gpus: int = 1) -> dict[str, Any]:
    """What the generic experiment reads (run.p), and what its result reports under params;
    ddp/zero1/fsdp also their ranks (`world_size`)."""
    return {**sizes, "workload": workload, "config": cfg.to_dict(),
            "optimizer": optimizer_info(cfg),
            **({"world_size": gpus} if cfg.parallel != "none" else {})}


def worker_ranks(cfg: TrainConfig, mode: str, gpus: int) -> int:
    """Workers a combination starts (RunRequest.ranks): one per rank for ddp/zero1/fsdp on
    cuda and cpu; one in sim, which simulates the ranks in one process."""
    return gpus if cfg.parallel != "none" and not mode_info(mode).ranks_in_one_process else 1


@dataclass
class Row:
    combo: str
    status: str
    peak_bytes: int
    delta_bytes: int | None  # vs the baseline (None for the baseline or a failed run)
    delta_frac: float | None
    step_time_s: float | None
    throughput: float | None  # tokens/s or samples/s (None when not timed)
    unit: str
    error: str | None = None
    allocator_peak_bytes: int | None = None  # cuda: the caching allocator's own peak
    reserved_peak_bytes: int | None = None


@dataclass
class Comparison:
    workload: str
    sizes: dict[str, Any]
    mode: str
    scale: str
    unit: str
    rows: list[Row] = field(default_factory=list)
    results: list[RunResult] = field(default_factory=list)
    gpus: int = 1  # ranks of the data-parallel combinations (peaks are per GPU: rank 0's)
    schema: int = SCHEMA

    @property
    def baseline(self) -> Row | None:
        return self.rows[0] if self.rows else None

    def to_dict(self, results: bool = True) -> dict[str, Any]:
        d = {"schema": self.schema, "kind": "comparison", "workload": self.workload,
             "sizes": self.sizes, "mode": self.mode, "scale": self.scale, "unit": self.unit,
             "gpus": self.gpus, "rows": [asdict(r) for r in self.rows]}
        if results:
            d["results"] = [r.to_dict() for r in self.results]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Comparison":
        if d.get("kind") != "comparison":
            raise ValueError("not a comparison (expected kind: comparison)")
        return cls(workload=d["workload"], sizes=d["sizes"], mode=d["mode"], scale=d["scale"],
                   unit=d.get("unit", "samples"), rows=[Row(**r) for r in d["rows"]],
                   gpus=int(d.get("gpus", 1)),
                   results=[RunResult.from_dict(r) for r in d.get("results", [])])


def rows_for(results: list[RunResult], items_per_step: int, unit: str) -> list[Row]:
    # Δ by lab.report's one rule: the first combination is the baseline, both must be ok
    deltas = with_deltas([row_of(r) for r in results], rule=FIRST)
    rows = []
    for r, d in zip(results, deltas):
        delta, frac = d.delta_bytes, d.delta_frac
        tput = items_per_step / r.step_time_s if r.step_time_s else None
        a = r.allocator
        rows.append(Row(r.variant, r.status, r.peak.bytes, delta, frac, r.step_time_s, tput, unit,
                        r.error.splitlines()[0] if r.error else None,
                        a.peak_allocated_bytes if a else None, a.peak_reserved_bytes if a else None))
    return rows


def run_compare(plan: ComparePlan, runner, on_event: Callable[[str, dict], None] | None = None,
                cancel: threading.Event | None = None,
                on_result: Callable[[RunResult], None] | None = None) -> Comparison:
    """Run every combination (one worker each) through the one run loop (lab.runner.loop):
    `on_event(combo_label, msg)` streams the workers' messages; `on_result` gets each result
    in order as it lands (the app's table fills in)."""
    from lab.runner.loop import run_all

    w = workload_for(plan.workload, plan.sizes)
    labels = [t.label for t in plan.combos]
    requests = plan.requests()

    def landed(i: int, res: RunResult) -> None:
        res.variant = labels[i]  # the worker ran variant "combo"; the row is the combination
        for key, value in requests[i].params.items():  # a failed worker's result has no params
            res.params.setdefault(key, value)
        if on_result:
            on_result(res)

    results = run_all(runner, requests, cancel=cancel, on_result=landed,
                      on_event=(lambda i, msg: on_event(labels[i], msg)) if on_event else None)
    return Comparison(plan.workload, dict(plan.sizes), plan.mode, plan.scale, w.unit,
                      rows_for(results, w.items_per_step(plan.sizes), w.unit), results,
                      gpus=plan.gpus)


__all__ = ["ComparePlan", "Comparison", "LABEL", "Row", "rows_for", "run_compare", "run_params",
           "worker_ranks"]
