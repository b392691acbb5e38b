"""`memlab profile --steps N`: stop a script after N optimizer steps, say where it is after each,
and (sim) keep evaluation loops to N forward passes of one shape.

    with StepLimit(3, progress=write_line, counters=...):   # raises StepsDone after step 3
        runpy.run_path("train.py")

A training script's memory is settled after a few steps: the first step creates the optimizer's
state, the second runs forward and backward with it alive, and the caching allocator has
reserved its segments by then. So a profile needs a few steps, not the thousands a script is
written for; `StepsDone` is a BaseException so the script's own `except Exception:` lets it
through, and lab/profile/script.py turns it into a clean stop (status ok, noted).

Evaluation (sim only, `EvalCap`): forward passes of the outermost module with autograd off
(`torch.no_grad()`, `torch.inference_mode()`) between two optimizer steps are counted by the
shapes of their inputs; after N of one shape, the next ones of that shape are not run: their
outputs are made (fake tensors of the shapes, strides and dtypes the last one returned, so what
the script keeps of them is counted) without running the model. The memory an evaluation pass
takes inside the model is the same pass after pass; its outputs are what can pile up. A real run
(cpu, cuda) needs the real values, so there every pass runs.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

from lab.measure import torch_compat

from .run import DEFAULT_SIM_STEPS, PROGRESS  # noqa: F401  (re-exported)


class StepsDone(BaseException):
    """The step limit was reached (a clean stop, not an error of the script)."""


class StepLimit:
    """Counts optimizer steps (every optimizer's post hook); `limit`: stop after that many (None:
    never); `progress(step)`: called after each step (the progress line)."""

    def __init__(self, limit: int | None, progress=None):
        self.limit, self.progress = limit, progress
        self.steps = 0
        self._handle = None

    def __enter__(self) -> "StepLimit":
        self._handle = register_optimizer_step_post_hook(self._after_step)
        return self

    def __exit__(self, *exc) -> bool:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        return False

    def _after_step(self, optimizer, args, kwargs) -> None:
        self.steps += 1
        if self.progress is not None:
            self.progress(self.steps)
        if self.limit is not None and self.steps >= self.limit:
            raise StepsDone(self.steps)


def _signature(args, kwargs):
    leaves, spec = torch_compat.tree_flatten((args, kwargs))
    key = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            key.append(("T", tuple(x.shape), x.dtype))
        elif isinstance(x, (int, float, bool, str, type(None))):
            key.append(x)
        else:
            key.append(type(x).__name__)
    return str(spec), tuple(key)


class _Template(tuple):
    """("T", shape, stride, dtype) of an output tensor (a tuple leaf of the script's own is not
    one)."""


class EvalCap:
    """Evaluation forward passes of one input shape beyond `limit` between two optimizer steps
    are stood in for (module docstring). `make(shape, stride, dtype)` makes a GPU tensor."""

    def __init__(self, limit: int, make):
        from lab.measure.sim.facade.script_values import ScriptLog

        self.limit, self.make = limit, make
        self.sites = ScriptLog()  # only for its site(): where the skipped passes were asked for
        self.depth = 0
        self.ran: dict = {}  # signature -> passes run since the last step
        self.outputs: dict = {}  # signature -> (spec, leaf templates) of the last pass run
        self.skipped = 0
        self.skipped_at: dict[str, int] = {}
        self._orig = None
        self._handle = None

    def __enter__(self) -> "EvalCap":
        module = torch.nn.Module
        self._had = "__call__" in vars(module)
        self._orig = vars(module).get("__call__")
        orig, cap = module.__call__, self

        def __call__(mod, *args, **kwargs):
            if cap.depth or torch.is_grad_enabled():
                cap.depth += 1
                try:
                    return orig(mod, *args, **kwargs)
                finally:
                    cap.depth -= 1
            return cap.evaluate(orig, mod, args, kwargs)

        module.__call__ = __call__
        self._handle = register_optimizer_step_post_hook(lambda *a: self.ran.clear())
        return self

    def __exit__(self, *exc) -> bool:
        if self._had:
            torch.nn.Module.__call__ = self._orig
        if self._handle is not None:
            self._handle.remove()
        return False

    def evaluate(self, orig, mod, args, kwargs):
        key = (type(mod).__qualname__, id(mod), _signature(args, kwargs))
        if self.ran.get(key, 0) >= self.limit and key in self.outputs:
            self.skipped += 1
            site = self.sites.site(2)
            self.skipped_at[site] = self.skipped_at.get(site, 0) + 1
            spec, leaves = self.outputs[key]
            return torch_compat.tree_unflatten([self.make(*leaf[1:]) if isinstance(leaf, _Template)
                                          else leaf for leaf in leaves], spec)
        self.depth += 1
        try:
            out = orig(mod, *args, **kwargs)
        finally:
            self.depth -= 1
        self.ran[key] = self.ran.get(key, 0) + 1
        leaves, spec = torch_compat.tree_flatten(out)
        self.outputs[key] = (spec, [_Template(("T", tuple(x.shape), x.stride(), x.dtype))
                                    if isinstance(x, torch.Tensor) else x for x in leaves])
        return out

    def note(self) -> str | None:
        if not self.skipped:
            return None
        where = ", ".join(f"{s} x{n}" for s, n in self.skipped_at.items())
        return (f"evaluation: {self.skipped} forward passes with autograd off were not run ("
                f"{where}): after {self.limit} passes of one input shape between two optimizer "
                "steps, the next ones' outputs were made with the shapes the last one returned "
                "(the memory inside a pass repeats; what the script keeps of them is counted)")


__all__ = ["DEFAULT_SIM_STEPS", "EvalCap", "PROGRESS", "StepLimit", "StepsDone"]
