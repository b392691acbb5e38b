"""Lesson 22 (many GPUs) on N real GPUs: every variant on N ranks, each rank measured.

N comes from MEMLAB_GPUS (default 2): the same file checks two H200s (issue 13) and four or
eight (issue 16). Results come from a saved run when MEMLAB_CUDA_RESULTS names one
(`memlab run many-gpus --mode cuda --gpus N --save DIR`), else each variant runs fresh here.

    MEMLAB_GPUS=2 pytest -m cuda tests/gpu/test_many_gpus_cuda.py -s
    memlab run many-gpus --mode cuda --gpus 4 --save /tmp/n4
    MEMLAB_GPUS=4 MEMLAB_CUDA_RESULTS=/tmp/n4 pytest -m cuda tests/gpu/test_many_gpus_cuda.py -s

-s prints, per rank, the tracked and allocator peaks, the formula's bytes and the step time.
The sim-vs-GPU bar (3 %) runs without a GPU once the recording is in assets/reference
(tests/unit/test_many_gpus.py), or here with MEMLAB_SIM=1 (sim at the same N, in-process).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest
import torch

from lab.course.curriculum import load_course
from lab.measure.result import RunResult

N = int(os.environ.get("MEMLAB_GPUS", "2"))
LESSON = next(l for l in load_course().lessons if l.id == "many-gpus")
VARIANTS = [v.name for v in LESSON.variants]
GB = 1e9
SAVED = os.environ.get("MEMLAB_CUDA_RESULTS")
_saved = bool(SAVED) and all((Path(SAVED) / LESSON.id / f"{v}.json").is_file() for v in VARIANTS)
# a saved run is read on any CUDA machine (the session's GPU tests see one GPU); fresh runs
# need N GPUs here
pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA GPUs"),
              pytest.mark.skipif(not _saved and torch.cuda.is_available()
                                 and torch.cuda.device_count() < N,
                                 reason=f"needs {N} CUDA GPUs (MEMLAB_GPUS) or a saved run")]


@functools.lru_cache(maxsize=None)
def run(variant: str) -> RunResult:
    path = Path(SAVED) / LESSON.id / f"{variant}.json" if SAVED else None
    if path is not None and path.is_file():
        res = RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    else:
        from lab.runner.client import SubprocessRunner
        from lab.runner.protocol import RunRequest

        res = SubprocessRunner(gpus=N).run(RunRequest.for_lesson(
            LESSON, variant, "cuda", "seed", overrides={"world_size": N}))
    for r in res.ranks or [res]:
        a = r.allocator
        check = r.checks[0] if r.checks else None
        print(f"\n[{variant} rank {r.metrics.get('rank')} of {r.metrics.get('world_size')}] "
              f"{r.status} tracked {r.peak.bytes / GB:.3f} GB in {r.peak.phase!r}, allocated "
              f"{a.peak_allocated_bytes / GB if a else float('nan'):.3f} GB, reserved "
              f"{a.peak_reserved_bytes / GB if a else float('nan'):.3f} GB, nvml "
              f"{(a.nvml_used_bytes or 0) / GB if a else float('nan'):.3f} GB; formula "
              f"{check.expected_bytes / GB if check else float('nan'):.3f} GB; step "
              f"{r.step_time_s}; {json.dumps(r.peak.by_category)}; metrics {r.metrics}; "
              f"error {r.error}")
    return res


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_rank_runs_and_is_measured(variant):
    res = run(variant)
    assert res.status == "ok", res.error
    assert len(res.ranks) == N == res.metrics["world_size"] and [r.metrics["rank"] for r in res.ranks] == list(range(N))
    for r in res.ranks:  # each its own GPU, timeline, categories and phases
        assert r.allocator is not None and r.timeline.by_category and r.phases
        assert r.metrics["world_size"] == N and r.step_time_s


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_formula_is_within_5_percent_of_each_rank(variant):
    for r in run(variant).ranks:
        [c] = r.checks  # the allocator's peak in the check's phase vs the lesson's formula
        assert c.measured_bytes == pytest.approx(c.expected_bytes, rel=0.05), (r.metrics, c)


def test_fsdp_peaks_below_ddp_on_every_rank():
    ddp, fsdp = run("baseline"), run("fsdp")
    for d, f in zip(ddp.ranks, fsdp.ranks):
        assert f.peak.bytes < d.peak.bytes
        assert f.allocator.peak_allocated_bytes < d.allocator.peak_allocated_bytes


@pytest.mark.skipif(os.environ.get("MEMLAB_SIM") != "1", reason="MEMLAB_SIM=1 runs the sim here")
@pytest.mark.parametrize("variant", VARIANTS)
def test_sim_at_the_same_n_is_within_3_percent_of_each_rank(variant):
    from lab.measure.backends import backend_for
    from lab.measure.measure import VariantSpec, measure
    from lab.runner.worker import load_experiment

    fn = getattr(load_experiment(str(LESSON.experiment_path)), variant)

    @functools.lru_cache(maxsize=None)
    def sim(rank: int) -> int:
        params = {**LESSON.params("seed"), "world_size": N, "sim_rank": rank}
        return measure(fn,
                       VariantSpec(LESSON.id, variant, "seed", params, timing=False),
                       backend_for("sim")).peak.bytes

    for r in run(variant).ranks:
        # ZeRO-1's ranks hold different parts of the optimizer state: simulate that rank
        rank = int(r.metrics["rank"]) if variant == "zero1" else 0
        assert sim(rank) == pytest.approx(r.peak.bytes, rel=0.03), (variant, r.metrics)
