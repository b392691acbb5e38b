"""Every lesson's claims, checked on a real CUDA GPU (the H200 reference machine).

Skipped without CUDA. What is checked is exactly what `memlab dev check` checks against the
recordings in assets/reference, with the same function (lab.course.claims.verify), but on FRESH runs:
each variant at seed scale in its own worker process (a fresh CUDA context and a clean caching
allocator), with the timing pass on, as `memlab run` does. No number is written here: the
lessons' claims (lesson.toml) are the expectations, pending ones included, so a re-recording is
checked before it replaces the reference.

    pytest -m cuda tests/gpu/test_lessons_cuda.py -k "10 or 12" -s      # fresh runs
    memlab run --all --mode cuda --scale seed --save /tmp/rec
    MEMLAB_CUDA_RESULTS=/tmp/rec pytest -m cuda tests/gpu/test_lessons_cuda.py   # a saved run

-s prints, per variant, the tracked and allocator peaks, the step time and the metrics.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from lab.course.claims import verify
from lab.course.curriculum import load_course
from lab.measure.result import RunResult

pytestmark = [pytest.mark.cuda, pytest.mark.slow,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

COURSE = load_course()
LESSONS = {l.key: l for l in COURSE.lessons}
MB = 1e6


def _missing(lesson) -> list[str]:
    return [name for name in lesson.requires if importlib.util.find_spec(name) is None]


@functools.lru_cache(maxsize=None)
def run(key: str, variant: str) -> RunResult:
    lesson = LESSONS[key]
    saved = os.environ.get("MEMLAB_CUDA_RESULTS")  # a `memlab run --all --save DIR` of this tree
    path = Path(saved) / lesson.id / f"{variant}.json" if saved else None
    if path is not None and path.is_file():
        res = RunResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    else:
        from lab.runner.client import SubprocessRunner
        from lab.runner.protocol import RunRequest

        # a lesson on several GPUs (world_size) starts one worker per rank, one GPU each
        ranks = lesson.ranks("seed", "cuda")
        if ranks > torch.cuda.device_count():
            pytest.skip(f"lesson {key} trains on {ranks} GPUs; this machine has "
                        f"{torch.cuda.device_count()}")
        res = SubprocessRunner(gpus=ranks if ranks > 1 else 0).run(
            RunRequest.for_lesson(lesson, variant, "cuda", "seed"))
    a = res.allocator
    print(f"\n[{key} {variant}] {res.status} tracked peak {res.peak.bytes / 1e9:.3f} GB in "
          f"{res.peak.phase!r}; allocated {a.peak_allocated_bytes / 1e9 if a else float('nan'):.3f}"
          f" GB, reserved {a.peak_reserved_bytes / 1e9 if a else float('nan'):.3f} GB; step "
          f"{res.step_time_s}; metrics {res.metrics}; error {res.error}")
    return res


def _results(lesson, names) -> dict[str, RunResult]:
    missing = _missing(lesson)
    if missing and any(n != "baseline" for n in names):
        pytest.skip(f"needs the optional package(s) {', '.join(missing)}")
    return {n: run(lesson.key, n) for n in names}


# a superseded claim states an earlier recording (assets/superseded/<date>/, checked there by
# `memlab dev check`), not what this GPU measures now
CLAIMS = [(l.key, c.id) for l in COURSE.lessons for c in l.claims
          if c.mode == "cuda" and not c.superseded]


@pytest.mark.parametrize("key,claim_id", CLAIMS, ids=["-".join(c) for c in CLAIMS])
def test_claim_holds_on_a_fresh_cuda_run(key, claim_id):
    # Given the claim lesson.toml states (a value and/or a direction against another variant),
    # when the variants it names run on this GPU, then the run backs it as a recording must
    lesson = LESSONS[key]
    claim = lesson.claim(claim_id)
    names = [n for n in (claim.variant, claim.relative_to) if n]
    results = _results(lesson, names)
    problem = verify(claim, results)
    pending = " (H200 recording pending: update the claim's value if the run is right)" \
        if set(names) & set(lesson.pending) else ""
    assert problem is None, f"lessons/{lesson.slug}: {claim_id}: {problem}{pending}"


# not a variant of sim only (lesson 22's fsdp_offload: modes = ["sim"]; nothing to record it on)
VARIANTS = [(l.key, v.name) for l in COURSE.lessons for v in l.variants if v.runs_in("cuda")]


@pytest.mark.parametrize("key,variant", VARIANTS, ids=["-".join(v) for v in VARIANTS])
def test_variant_runs_and_its_checks_match_the_allocator(key, variant):
    # Given a variant's [[checks]] (numel × itemsize), then the CUDA allocator's bytes for the
    # phase are within 1 % (or the check's tolerance) or 64 MB of them (512-byte rounding,
    # blocks kept whole), and a run
    # that stops is an out-of-memory error (a lesson's point), never a crash
    lesson = LESSONS[key]
    res = _results(lesson, [variant])[variant]
    assert res.status in ("ok", "oom"), f"{key}/{variant}: {res.error}"
    assert res.allocator is not None and res.peak.bytes > 0
    if res.status == "oom":
        assert "Tried to allocate" in res.error
    for c in res.checks:
        if c.source.startswith("tracked") and "optimizer_state" in c.source:
            # AdamW's step counters stay on the CPU on CUDA (foreach / for-loop): 4 B per tensor
            assert c.expected_bytes - 4 * 400 <= c.measured_bytes <= c.expected_bytes, c
        else:  # a check may say how close (lesson 22's per-rank formulas: 5 %)
            frac = next((x.get("tolerance", 0.01) for x in lesson.checks if x["name"] == c.name), 0.01)
            tol = max(abs(c.expected_bytes) * frac, 64 * MB)
            assert abs(c.measured_bytes - c.expected_bytes) <= tol, c


def test_every_lesson_states_claims():
    # the claims above are the whole of what this file checks: a lesson without any is unchecked
    assert not [l.key for l in COURSE.lessons if not l.claims]
