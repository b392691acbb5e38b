"""Workloads the playground can run: a name, default sizes, and a `step(run, techniques)`.

A workload is a small adapter. `step` builds the model and the data (setup phases) and runs
`run.p.steps` steps with the techniques switched on, usually through
`lab.playground.training.run_steps`. Sizes live in `run.p`; every workload has `batch`, `dtype`
and `steps`; `seq` where it has one. This module never imports torch: `step` is imported when
a worker calls it.

Registering more (the hook the lessons' workloads plug into):

    from lab.playground.workloads import Workload, register
    register(Workload(name="gpt2-small", title="GPT-2 124M (transformers config, random weights)",
                      sizes={"small": {...}, "seed": {...}}, step="lab.experiments.x:gpt2_step",
                      supports=frozenset(KINDS), unit="tokens"))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from .techniques import KINDS, ComboError, Techniques

COMMON = {"dtype": "float32", "steps": 2}


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    sizes: dict[str, dict[str, Any]]  # scale ("small" | "seed") -> default sizes
    step: str | Callable  # "module:function" (imported in the worker) or the function itself
    supports: frozenset = frozenset(KINDS)  # which technique kinds make sense here
    unit: str = "samples"  # throughput unit: "tokens" (batch × seq) or "samples" (batch)
    notes: tuple[str, ...] = field(default=())

    def step_fn(self) -> Callable:
        if callable(self.step):
            return self.step
        module, _, fn = self.step.partition(":")
        return getattr(importlib.import_module(module), fn)

    def default_sizes(self, scale: str) -> dict[str, Any]:
        if scale not in self.sizes:
            raise KeyError(f"workload {self.name!r} has no {scale!r} sizes "
                           f"(it has {', '.join(self.sizes)})")
        return {**COMMON, **self.sizes[scale]}

    def items_per_step(self, sizes: dict[str, Any]) -> int:
        """Tokens (or samples) one optimizer step processes."""
        n = int(sizes.get("batch", 1))
        return n * int(sizes.get("seq", 1)) if self.unit == "tokens" else n

    def check(self, t: Techniques) -> None:
        missing = t.kinds() - set(self.supports)
        if missing:
            raise ComboError(f"workload {self.name!r} does not support {', '.join(sorted(missing))} "
                             f"(combination {t.label!r})")


_REGISTRY: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    _REGISTRY[w.name] = w
    return w


register(Workload(
    name="linear",
    title="one big nn.Linear trained with MSE (lesson 01's layer)",
    sizes={"small": {"batch": 256, "d_in": 512, "d_out": 2048},
           "seed": {"batch": 5000, "d_in": 10_000, "d_out": 50_000}},
    step="lab.playground.models:linear_step",
    supports=frozenset(KINDS) - {"ckpt", "parallel"},  # one layer: nothing to recompute
    unit="samples",
))
register(Workload(
    name="mlp",
    title="a residual MLP stack on (batch, seq, d_model): a transformer's feed-forward halves",
    sizes={"small": {"batch": 4, "seq": 64, "d_model": 128, "hidden_mult": 4, "layers": 4},
           "seed": {"batch": 16, "seq": 1024, "d_model": 2048, "hidden_mult": 4, "layers": 24}},
    step="lab.playground.models:mlp_step",
    supports=frozenset(KINDS) - {"parallel"},  # data parallel: the language models only
    unit="tokens",
))


# ---- MERGE HOOK: the transformers workloads (issue 4, lab/experiments) ------------------------
# The lessons branch provides GPT-2 tiny/small and the Qwen2-style 1.5B layout. At merge, expose
# them from lab/experiments as `PLAYGROUND_WORKLOADS: list[Workload]` (or call `register` there);
# they are picked up here on first use, without importing torch or transformers before a worker
# needs them. Each needs: name, sizes per scale (batch, seq, dtype, steps, ...), and
# `step(run, techniques)` — reuse `lab.playground.training.run_steps` or the lessons' own loop.
_EXTERNAL_LOADED = False


def _load_external() -> None:
    global _EXTERNAL_LOADED
    if _EXTERNAL_LOADED:
        return
    _EXTERNAL_LOADED = True
    try:
        mod = importlib.import_module("lab.experiments.playground")
    except ImportError:
        return
    for w in getattr(mod, "PLAYGROUND_WORKLOADS", []):
        register(w)


def all_workloads() -> dict[str, Workload]:
    _load_external()
    return dict(_REGISTRY)


def get_workload(name: str) -> Workload:
    ws = all_workloads()
    if name not in ws:
        raise KeyError(f"no workload {name!r}; the workloads: {', '.join(ws)}")
    return ws[name]


def parse_sizes(pairs: list[str]) -> dict[str, Any]:
    """['d_model=512', 'dtype=bfloat16'] -> {'d_model': 512, 'dtype': 'bfloat16'}."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{pair!r} is not KEY=VALUE (e.g. layers=8)")
        v: Any = value.strip()
        for cast in (int, float):
            try:
                v = cast(v)
                break
            except ValueError:
                continue
        out[key.strip()] = v
    return out


__all__ = ["Workload", "all_workloads", "get_workload", "parse_sizes", "register"]
