"""Your own script, measured: `memlab profile -- python train.py ARGS`, `memlab.track()` and
`memlab.phase()` (the `memlab` package re-exports the last two).

    run       the command line -> a RunRequest (experiment: script.py) -> a RunResult (headless)
    script    the experiment the worker imports: the script under runpy and the tracker (torch);
              in sim inside the CUDA facade (lab.measure.sim.facade.cuda_facade)
    phases    forward / backward / step / data phases from PyTorch's hooks (torch)
    steps     --steps N: stop after N optimizer steps, a progress line each; sim's eval cap (torch)
    track     `with memlab.track() as t:` in this process, e.g. a notebook (torch)
    text      a profiled result as text (headless)

`phase` is torch-free and a no-op when nothing is tracking, so a script can keep its
`with memlab.phase("eval"):` markers when it runs on its own.
"""

from __future__ import annotations

from contextlib import nullcontext

from . import _active


def phase(name: str):
    """`with memlab.phase("eval"): ...` names a phase of your own while memlab tracks (under
    `memlab profile` or inside `memlab.track()`); outside them it does nothing."""
    auto = _active.current()
    return auto.custom(name) if auto is not None else nullcontext()


def track(*objs, device: str | None = None, label: str = "notebook"):
    """`with memlab.track(model, opt) as t: ...` then `t.peak`, `t.report()`, `t.result`
    (lab.profile.track; imports torch)."""
    from .track import track as _track

    return _track(*objs, device=device, label=label)


__all__ = ["phase", "track"]
