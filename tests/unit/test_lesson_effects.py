"""Every lesson's claims, on fresh runs: sim mode at seed scale and cpu mode at small scale.

The lessons' numbers are checked against the H200 recordings by `memlab dev check`. What this
file adds is that the simulation and the CPU, which are what a learner without a GPU runs, still
show what each lesson teaches:

- every claim with `also = ["sim", "cpu"]` keeps its direction on a fresh run in those modes
  (lab.course.claims.direction_problem, the same rule dev check applies to the recordings);
- every `[[checks]]` formula (numel × itemsize) equals the tracked bytes exactly, as it must off
  CUDA, where nothing rounds;
- a variant either finishes, or runs out of memory on the virtual GPU its lesson sets up, or
  says in a NotImplementedError that it does not run in this mode (liger's Triton kernel off
  CUDA).

Lessons and claims are read from disk: nothing here names a lesson. Each variant runs in-process
through `measure_request` (the worker's code path without the subprocess), once per session, and
without the timing pass: tests assert bytes and directions of bytes, never times.
"""

from __future__ import annotations

import functools
import gc
import importlib.util
import json
import re
import textwrap

import pytest

from lab.course.claims import direction_problem, quantity
from lab.course.curriculum import load_course, load_lesson
from lab.course.reference import REFERENCE_DIR
from lab.runner.protocol import RunRequest
from lab.runner.worker import load_experiment, measure_request

from ..shared_runs import shared

COURSE = load_course()
LESSONS = {l.key: l for l in COURSE.lessons}
SCALE = {"sim": "seed", "cpu": "small"}


def missing_requirements(lesson) -> list[str]:
    return [name for name in lesson.requires if importlib.util.find_spec(name) is None]


@functools.lru_cache(maxsize=None)
def _module(key):
    return load_experiment(str(LESSONS[key].experiment_path))


@functools.lru_cache(maxsize=1)
def _warm_up():
    # Import transformers' model code once, then freeze the heap: the engine's gc.collect()
    # after every run then scans only the objects the run made (seconds saved per run).
    from lab.workloads.models import build_model

    build_model("tiny", "cpu")
    gc.collect()
    gc.freeze()


@functools.lru_cache(maxsize=None)
def measured(key: str, variant: str, mode: str):
    """The variant's result in `mode` at its scale, run once per session (tests/shared_runs.py:
    the suite's workers share it; test_many_gpus reads lesson 22's from here too)."""
    return shared(("lesson", key, variant, mode), lambda: _measure(key, variant, mode))


def _measure(key: str, variant: str, mode: str):
    _warm_up()
    lesson = LESSONS[key]
    scale = SCALE[mode]
    ranks = lesson.ranks(scale, mode)
    if ranks > 1:  # a lesson on several ranks (gloo on cpu): one worker per rank, as memlab runs it
        from lab.runner.client import SubprocessRunner

        return SubprocessRunner().run(RunRequest.for_lesson(lesson, variant, mode, scale,
                                                            timing=False, ranks=ranks))
    # the variant's environment is set as the worker sets it (sim's allocator model reads
    # PYTORCH_CUDA_ALLOC_CONF / PYTORCH_ALLOC_CONF when the run starts: lessons 17 and 23)
    return measure_request(RunRequest.for_lesson(lesson, variant, mode, scale, timing=False),
                           getattr(_module(key), variant))


def _skip_if_unavailable(lesson, variant: str, mode: str) -> None:
    if mode not in lesson.modes:
        pytest.skip(f"lesson {lesson.key} does not run in {mode} mode")
    if not lesson.variant(variant).runs_in(mode):
        pytest.skip(lesson.variant(variant).not_run_in(mode))
    missing = missing_requirements(lesson)
    if missing and variant != "baseline":
        pytest.skip(f"needs the optional package(s) {', '.join(missing)}")


# ---- every variant, both modes: it runs, and its exact-byte checks hold -------------------------
RUNS = [(l.key, v.name, mode) for l in COURSE.lessons for v in l.variants for mode in SCALE]


@pytest.mark.slow
@pytest.mark.parametrize("key,variant,mode", RUNS, ids=["-".join(r) for r in RUNS])
def test_variant_runs_and_its_checks_hold(key, variant, mode):
    lesson = LESSONS[key]
    if mode not in lesson.modes:
        pytest.skip(f"lesson {key} does not run in {mode} mode")
    if not lesson.variant(variant).runs_in(mode):
        pytest.skip(lesson.variant(variant).not_run_in(mode))
    res = measured(key, variant, mode)
    if res.status == "error" and res.error.startswith("NotImplementedError"):
        pytest.skip(f"the variant says it does not run in {mode} mode: {res.error}")
    missing = missing_requirements(lesson)
    if res.status == "error" and missing:
        # without the optional extra the variant explains itself in one line, and nothing crashes
        assert "pip install" in res.error, res.error
        return
    if res.status == "oom":
        # only a variant that sets up a virtual GPU (the lesson's gpu_memory, or a cap it reports
        # as the gpu_cap metric) may run out of memory off CUDA, and then with PyTorch's message
        capped = lesson.params(SCALE[mode]).get("gpu_memory") or res.metrics.get("gpu_cap")
        assert capped, res.error
        assert "out of memory" in res.error.lower() and "Tried to allocate" in res.error
    else:
        assert res.status == "ok", res.error
        assert res.peak.bytes > 0 and res.timeline.events > 0
    tolerance = {c["name"]: c.get("tolerance") for c in lesson.checks}
    for c in res.checks:  # the checks of the phases that ran
        if tolerance.get(c.name):
            # a formula with a tolerance models CUDA's kernels (lesson 22's per-rank peaks): sim
            # takes CUDA's paths and is held to it; the CPU's kernels save other tensors
            if mode == "sim":
                assert c.measured_bytes == pytest.approx(c.expected_bytes, rel=tolerance[c.name]), c
        elif c.source.startswith("tracked peak"):
            assert c.measured_bytes == pytest.approx(c.expected_bytes, rel=1e-4), c
        else:  # deltas and categories are numel × itemsize: exact off CUDA
            assert c.measured_bytes == c.expected_bytes, c


# ---- every claim that says it holds in sim or cpu too ---------------------------------------------
ALSO = [(l.key, c.id, mode) for l in COURSE.lessons for c in l.claims for mode in c.also
        if mode in SCALE]


@pytest.mark.slow
@pytest.mark.parametrize("key,claim_id,mode", ALSO, ids=["-".join(a) for a in ALSO])
def test_claim_direction_holds_on_a_fresh_run(key, claim_id, mode):
    lesson = LESSONS[key]
    claim = lesson.claim(claim_id)
    for v in (claim.variant, claim.relative_to):
        _skip_if_unavailable(lesson, v, mode)
    mine, base = measured(key, claim.variant, mode), measured(key, claim.relative_to, mode)
    a, b = quantity(mine, claim.quantity), quantity(base, claim.quantity)
    assert a is not None, f"{claim.variant} ({mode}, {mine.status}) has no {claim.quantity}: {mine.error}"
    assert b is not None, f"{claim.relative_to} ({mode}, {base.status}) has no {claim.quantity}: {base.error}"
    problem = direction_problem(claim, float(a), float(b))
    assert problem is None, f"lessons/{lesson.slug}: claim {claim_id} in {mode}: {problem}"


def test_the_course_has_claims_to_check_off_cuda():
    # Given the lessons on disk, then some of their claims are re-checked here (if this list were
    # empty, the test above would pass without checking anything)
    assert len(ALSO) >= 10, ALSO
    assert {mode for _, _, mode in ALSO} == {"sim", "cpu"}


# ---- quoted error messages are the recorded ones --------------------------------------------------
FENCE_RE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def _quoted_oom_messages(lesson) -> list[list[str]]:
    """The fenced blocks of lesson.md that quote a CUDA out-of-memory message, as lines."""
    out = []
    for block in FENCE_RE.findall(lesson.markdown):
        lines = [ln.strip() for ln in textwrap.dedent(block).splitlines() if ln.strip()]
        if lines and lines[0].startswith("CUDA out of memory"):
            out.append([ln for ln in lines if ln not in ("[…]", "...", "…")])
    return out


QUOTING = [l for l in COURSE.lessons if _quoted_oom_messages(l)]


@pytest.mark.parametrize("lesson", QUOTING, ids=lambda l: l.key)
def test_a_quoted_out_of_memory_message_is_a_recorded_one(lesson):
    # Given a lesson that quotes PyTorch's message, then every line of the quote is part of the
    # error of one recorded H200 run of that lesson (nobody retypes PyTorch's numbers)
    errors = {}
    for v in lesson.variants:
        path = REFERENCE_DIR / lesson.id / f"{v.name}.json"
        if path.is_file():
            errors[v.name] = json.loads(path.read_text(encoding="utf-8")).get("error") or ""
    for lines in _quoted_oom_messages(lesson):
        ok = [name for name, err in errors.items() if all(ln in err for ln in lines)]
        if not ok and lesson.pending:
            pytest.skip(f"{', '.join(lesson.pending)}: H200 recording pending")
        assert ok, (f"lessons/{lesson.slug}/lesson.md quotes an out-of-memory message that no "
                    f"recording of {lesson.id} contains:\n" + "\n".join(lines))


# ---- the worker sets a variant's environment before torch is imported ----------------------------
LESSON_TOML = """\
id = "env-probe"
title = "env probe"
objectives = ["x"]
[[variants]]
name = "baseline"
title = "no env"
[[variants]]
name = "with_env"
title = "env"
env = { MEMLAB_PROBE = "on" }
[scales.seed]
n = 1
[scales.small]
n = 1
"""
EXPERIMENT = """\
import os, sys
TORCH_BEFORE = "torch" in sys.modules  # the worker must not have imported torch yet
SEEN = os.environ.get("MEMLAB_PROBE", "")

def baseline(run):
    run.metric("probe_on", SEEN == "on")
    run.metric("torch_before", TORCH_BEFORE)

def with_env(run):
    baseline(run)
"""


@pytest.mark.slow
def test_a_variant_env_reaches_its_process_before_torch(tmp_path, monkeypatch):
    # Given a lesson whose variant sets an environment variable (lesson 17 sets
    # PYTORCH_CUDA_ALLOC_CONF this way), when the worker runs it, then the experiment sees the
    # variable at import time, before torch is imported, and the other variant does not
    from lab.runner.client import SubprocessRunner

    folder = tmp_path / "01-env-probe"
    folder.mkdir()
    (folder / "lesson.toml").write_text(LESSON_TOML, encoding="utf-8")
    (folder / "lesson.md").write_text("# env probe\n", encoding="utf-8")
    (folder / "experiment.py").write_text(EXPERIMENT, encoding="utf-8")
    monkeypatch.delenv("MEMLAB_PROBE", raising=False)
    runner = SubprocessRunner()
    got = {}
    for variant in ("baseline", "with_env"):
        res = runner.run(RunRequest.for_lesson(load_lesson(folder), variant, "cpu", "small",
                                               timing=False, timeout_s=120))
        assert res.status == "ok", res.error
        got[variant] = res.metrics
    assert got["with_env"] == {"probe_on": 1.0, "torch_before": 0.0}
    assert got["baseline"]["probe_on"] == 0.0
