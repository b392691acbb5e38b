"""Scripts that call `torch.compile`: detected, said, and on CUDA measured as they really run.

The lab's tracker is a TorchDispatchMode, and a compiled graph cannot run under one: a tracked
run of a compiled script measures its *eager* version, which can need much more (a GPT-2 script
measured 13.87 GB eager against 10.24 GB compiled on an H200, issue 22). So:

  worker, every mode   `CompileWatch` replaces `torch.compile` while the script runs, records
                       who called it (file:line) and, in the tracked pass, hands the model back
                       uncompiled, as `torch.compile(..., disable=True)` would: the eager run is
                       then the one the tracker can see, on purpose and said so.
  worker, compiled     `CompileWatch(real=True)` calls the real `torch.compile`, and `untracked()`
  pass (CUDA)          takes the tracker's dispatch mode off for the script, so Inductor's code
                       runs as it does without the lab; the allocator's counters and its
                       `_record_memory_history` (the worker records both on CUDA) are then the
                       compiled run's.
  client               `measure_compiled` runs that second pass in a fresh worker when the first
                       found a call and ran on a GPU, and `merge` makes one result of the two:
                       the compiled run's counters and timeline, categories at its peak guessed
                       from the snapshot's stacks (lab.snapshots: the tracker cannot see inside
                       a graph), the eager numbers beside them. `say_eager` words a result that
                       only has the eager version (sim, cpu, or a compiled pass that failed).

The first line of such a result (notes[0], and the first line `memlab profile` prints) says
which version was measured, with both numbers where both exist. `torch._dynamo.optimize` and
`torch.jit` are not watched: `torch.compile` (and `nn.Module.compile`, which calls it) is what
training scripts use.
"""

from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

HEADLINE = "torch.compile"  # notes[0] starts with this when the script called it
SITES_NOTE = "the script calls torch.compile at "  # written by the worker, read by the client
COMPILED_PASS = "compiled_pass"  # the request parameter that asks the worker for pass 2


# ---- worker side ------------------------------------------------------------------------------
class CompileWatch:
    """`with CompileWatch(real=False) as w:` around the script: `w.sites` lists who called
    `torch.compile`. real=False hands back the model itself (the eager version); real=True
    compiles it."""

    def __init__(self, real: bool = False, estimate=None):
        self.real = real
        self.estimate = estimate  # sim's compiled pass: (original, model, **kwargs) -> compiled
        self.sites: list[str] = []
        self._orig = None

    def __enter__(self) -> CompileWatch:
        import torch

        self._orig = torch.compile
        torch.compile = self._compile
        return self

    def __exit__(self, *exc) -> bool:
        import torch

        torch.compile = self._orig
        return False

    def _compile(self, model=None, **kwargs):
        if not kwargs.get("disable"):
            site = caller_site()
            if site not in self.sites:
                self.sites.append(site)
        if self.estimate is not None:
            return self.estimate(self._orig, model, **kwargs)
        if self.real:
            return self._orig(model, **kwargs) if model is not None else self._orig(**kwargs)
        if model is None:  # @torch.compile(mode=...) as a decorator factory
            return lambda fn: fn
        return model


def caller_site(skip: int = 2) -> str:
    """'train.py:331': the innermost frame outside torch, the standard library and the lab
    (`nn.Module.compile` calls torch.compile for the script)."""
    from lab.snapshots.frames import is_internal

    f = sys._getframe(skip)
    while f is not None and is_internal(f.f_code.co_filename):
        f = f.f_back
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno}" if f is not None else "?"


@contextmanager
def untracked():
    """The script runs with no dispatch mode on (the tracker's is put back after), so compiled
    graphs run as they do without the lab (lab.measure.torch_compat: a private torch API)."""
    from lab.measure.torch_compat import disable_current_modes

    with disable_current_modes():
        yield


def record(run, watch: CompileWatch) -> None:
    """What the worker hands the client: the sites (a note) and their count (a metric)."""
    if watch.sites:
        run.note(SITES_NOTE + ", ".join(watch.sites))
        run.metric("torch_compile_calls", len(watch.sites))


# ---- client side ------------------------------------------------------------------------------
def sites(r) -> list[str]:
    for n in r.notes:
        if n.startswith(SITES_NOTE):
            return n[len(SITES_NOTE):].split(", ")
    return []


def headline(r) -> str | None:
    """The line a compiled script's result begins with, or None."""
    return r.notes[0] if r.notes and r.notes[0].startswith(HEADLINE) else None


def _numbers(r) -> str:
    from lab.report import format_bytes

    a = r.allocator
    if a is not None and a.peak_allocated_bytes:
        word = "predicted " if a.predicted else ""
        return (f"{word}max allocated {format_bytes(a.peak_allocated_bytes)}, reserved "
                f"{format_bytes(a.peak_reserved_bytes)}")
    return f"tensors' peak {format_bytes(r.peak.bytes)}"


def say_eager(r, why: str = "") -> None:
    """First line of a result that measured only the eager version of a compiled script."""
    where = ", ".join(sites(r))
    info = r.mode_info
    if info is not None and info.simulated:
        text = (f"{HEADLINE} ({where}) ran eagerly: sim predicts the eager version, "
                f"{_numbers(r)}; it cannot run Inductor's kernels on fake tensors, and compiled "
                "code often keeps fewer intermediates: measure the compiled run with --mode cuda "
                "on a GPU")
    elif info is not None and info.on_gpu:
        why = why or f"was not run (the eager run ended {r.status})"
        text = (f"{HEADLINE} ({where}): only the eager version was measured, {_numbers(r)}; "
                f"the compiled run {why}")
    else:
        text = (f"{HEADLINE} ({where}) ran eagerly under the tracker: these are the eager "
                f"version's numbers, {_numbers(r)}; on a CUDA GPU --mode cuda also measures the "
                "compiled run")
    r.notes.insert(0, text)


def wants_compiled_pass(r) -> bool:
    """A call was found, on a real GPU, and the eager pass got far enough to be worth it."""
    return bool(sites(r)) and r.on_gpu and r.status in ("ok", "oom")


def compiled_request(req, snapshot: str):
    params = {**req.params, COMPILED_PASS: True}
    return replace(req, params=params, profile_path=snapshot)


def measure_compiled(eager, req, run_again, user_snapshot: str | None):
    """`run_again(request) -> RunResult` runs the compiled pass in a fresh worker; the result is
    `merge`d, or the eager one said as eager when that pass did not finish."""
    tmp = None
    path = user_snapshot
    if path is None:
        fd, tmp = tempfile.mkstemp(prefix="memlab-compiled-", suffix=".pkl")
        os.close(fd)
        path = tmp
    try:
        comp = run_again(compiled_request(req, path))
        if comp.status not in ("ok", "oom"):
            say_eager(eager, why=f"failed: {comp.error or comp.status}")
            return eager
        return merge(eager, comp, path, keep_snapshot=user_snapshot is not None)
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def merge(eager, comp, snapshot_path: str | None, keep_snapshot: bool = True):
    """One result: the compiled run's allocator counters, timeline and guessed categories, the
    eager run's numbers beside them (metrics `eager_*`, and the first line)."""
    from lab.measure.allocator_view import from_allocator
    from lab.measure.result import Block, Peak
    from lab.report import format_bytes

    r = comp
    r.lesson, r.variant, r.params = eager.lesson, eager.variant, dict(eager.params)
    r.notes = [n for n in r.notes if not n.startswith(SITES_NOTE)]
    r.blocks, r.phases, r.checks = [], [], []
    from_allocator(r, [])  # the allocator's peak and timeline, said so (no tracker ran)
    summary = _summary(snapshot_path)
    if summary is not None:
        r.peak = Peak(bytes=summary.peak_bytes, phase=summary.peak_phase, index=-1,
                      by_category={k: v for k, v in summary.by_category.items() if v},
                      top=[Block(a.bytes, a.category, a.phase, -1, None, a.where)
                           for a in summary.live_at_peak[:20]])
        r.notes.append("categories and phase at the peak are guessed from the allocation "
                       "stacks of the compiled run's memory snapshot: the tracker cannot see "
                       "inside a compiled graph, so the compiled run is measured without it")
    elif r.allocator is None:
        r.peak = Peak(bytes=0)
    if not keep_snapshot:
        r.profile_path = None
    ea = eager.allocator
    r.metrics.update({"torch_compile_calls": float(len(sites(eager))),
                      "eager_tracked_peak_bytes": float(eager.peak.bytes)})
    if ea is not None:
        r.metrics.update(eager_peak_allocated_bytes=float(ea.peak_allocated_bytes),
                         eager_peak_reserved_bytes=float(ea.peak_reserved_bytes))
    eager_text = (f"max allocated {format_bytes(ea.peak_allocated_bytes)}, reserved "
                  f"{format_bytes(ea.peak_reserved_bytes)}" if ea is not None
                  else f"tensors' peak {format_bytes(eager.peak.bytes)}")
    r.notes.insert(0, f"{HEADLINE} ({', '.join(sites(eager))}): measured as compiled, "
                      f"{_numbers(r)} (the allocator's own counters, no tracker); its eager "
                      f"version under the tracker: {eager_text}")
    r.notes.append("phases are not split in the compiled run (the module hooks that find them "
                   "would change what torch.compile captures); the eager run's phases and exact "
                   f"categories: memlab profile's eager pass (peak {format_bytes(eager.peak.bytes)}"
                   f" in '{eager.peak.phase}')")
    return r


def _summary(path: str | None):
    if not path or not Path(path).exists() or Path(path).stat().st_size == 0:
        return None
    from lab.snapshots import open_summary

    try:
        return open_summary(path, top=50, freeze_gc=False)[0]
    except Exception:  # noqa: BLE001 - an unreadable snapshot costs the categories, not the run
        return None


__all__ = ["COMPILED_PASS", "CompileWatch", "HEADLINE", "caller_site", "compiled_request",
           "headline", "measure_compiled", "merge", "record", "say_eager", "sites", "untracked",
           "wants_compiled_pass"]
