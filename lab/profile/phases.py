"""Phases of a script nobody marked: found from PyTorch's own hooks while the tracker runs.

    auto = AutoPhases(tracker, records=session.phases, on_phase=...)
    with auto:            # hooks in; every storage born from now on carries the current phase
        runpy.run_path("train.py", run_name="__main__")

The names are the lab's phase vocabulary (0-based, as the recordings use):

  model        everything before the first forward (building the model, the optimizer, data)
  forward N    from the outermost module call (a global forward pre-hook) of step N; a second
               forward before step N's optimizer step is a micro-batch: forward N.1, N.2, ...
  backward N   from `torch.autograd.backward` / `torch.autograd.grad` (every `loss.backward()`
               goes through them; they are wrapped while tracking, and put back after)
  step N       from the optimizer's step pre-hook (global, every optimizer)
  zero_grad N  inside `Optimizer.zero_grad` / `Module.zero_grad` (wrapped too): after step N,
               or inside step N when called after its forward (the tutorial's order
               `zero_grad(); backward(); step()`), then backward N follows
  data N+1     after step N (and its zero_grad), until the next forward: the next batch

A module called *during* backward (activation checkpointing recomputes the forward) stays in
backward. `memlab.phase("eval")` (see `custom`) names a phase of the script's own; while it is
open the automatic names wait, and when it closes the phase it interrupted goes on.

Categories follow from the phases and PyTorch's roots (the tracker's `classify`): the outermost
module's parameters and buffers (and every optimizer's parameters) are marked as parameters when
first seen, so copies made by `.cuda()` / `.to()` count as parameters too; what is born in
`model` or `data N` and is not a parameter is an input.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import torch
from torch.nn.modules import module as nn_module
from torch.optim.optimizer import (register_optimizer_step_post_hook,
                                   register_optimizer_step_pre_hook)

from lab.measure.session import PhaseRecord

from . import _active

SETUP_KINDS = ("model", "data")


class AutoPhases:
    def __init__(self, tracker, records: list | None = None, on_phase=None):
        self.tracker = tracker
        self.records: list[PhaseRecord] = records if records is not None else []
        self.on_phase = on_phase
        self.step = 0  # optimizer steps done
        self.micro = 0  # forwards since the last step, minus one
        self.kind = ""  # what the hooks say: model | forward | backward | step | zero_grad | data
        self.auto_name = ""  # ... and its name, shown unless a custom phase is open
        self.name = ""  # the phase shown now
        self.depth = 0  # outermost module call = depth 1
        self.in_backward = 0
        self._custom: list[str] = []  # open memlab.phase(...) names, innermost last
        self._current: PhaseRecord | None = None
        self._handles: list = []
        self._orig: dict = {}
        self._seen_modules: set[int] = set()
        self._lock = threading.RLock()

    # ---- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "AutoPhases":
        self._handles = [
            nn_module.register_module_forward_pre_hook(self._forward_pre),
            nn_module.register_module_forward_hook(self._forward_post, always_call=True),
            register_optimizer_step_pre_hook(self._step_pre),
            register_optimizer_step_post_hook(self._step_post),
        ]
        self._orig = {"backward": torch.autograd.backward, "grad": torch.autograd.grad,
                      "opt_zero": torch.optim.Optimizer.zero_grad,
                      "mod_zero": torch.nn.Module.zero_grad}
        torch.autograd.backward = self._wrap(self._orig["backward"])
        torch.autograd.grad = self._wrap(self._orig["grad"])
        torch.optim.Optimizer.zero_grad = self._wrap_zero(self._orig["opt_zero"])
        torch.nn.Module.zero_grad = self._wrap_zero(self._orig["mod_zero"])
        _active.push(self)
        self._auto("model", "model")
        return self

    def __exit__(self, *exc) -> None:
        _active.remove(self)
        for h in self._handles:
            h.remove()
        self._handles.clear()
        torch.autograd.backward = self._orig["backward"]
        torch.autograd.grad = self._orig["grad"]
        torch.optim.Optimizer.zero_grad = self._orig["opt_zero"]
        torch.nn.Module.zero_grad = self._orig["mod_zero"]
        self.close()

    # ---- phase records --------------------------------------------------------------------------
    def switch(self, name: str, setup: bool = False) -> None:
        """End the current phase and start `name` (nothing happens when it is the current one)."""
        with self._lock:
            if self._current is not None and name == self.name:
                return
            self.close()
            tr = self.tracker
            self.name = name
            self._current = PhaseRecord(name=name, setup=setup, t_start=time.perf_counter(),
                                        start_index=len(tr.trace.events),
                                        start_bytes=tr.live_bytes)
            tr.phase = name
            if setup:  # what is born here and is no parameter is an input
                tr.phase_category[name] = "inputs"
            tr.peak_bytes = tr.live_bytes  # per-phase peak, as Session.phase does
        if self.on_phase:
            self.on_phase(name)

    def close(self) -> None:
        with self._lock:
            rec, self._current = self._current, None
            if rec is None:
                return
            tr = self.tracker
            rec.t_end = time.perf_counter()
            rec.duration_s = rec.t_end - rec.t_start
            rec.end_index, rec.end_bytes = len(tr.trace.events), tr.live_bytes
            rec.peak_bytes = tr.peak_bytes
            tr.phase = ""
            if rec.setup and rec.name != "model" and rec.end_index == rec.start_index:
                return  # a data phase nothing happened in (zero_grad came right after the step)
            tr.trace.phases.append((rec.name, rec.t_start - tr._t0, rec.t_end - tr._t0))
            tr.phase = ""
            self.records.append(rec)

    def _auto(self, kind: str, name: str) -> None:
        """What the hooks found; shown unless the script's own phase is open."""
        self.kind, self.auto_name = kind, name
        if not self._custom:
            self.switch(name, setup=kind in SETUP_KINDS)

    def _suffix(self) -> str:
        return f"{self.step}" + (f".{self.micro}" if self.micro else "")

    # ---- hooks ------------------------------------------------------------------------------------
    def _forward_pre(self, module, args) -> None:
        self.depth += 1
        if self.depth != 1 or self.in_backward:
            return  # an inner module, or a forward recomputed during backward (checkpointing)
        if id(module) not in self._seen_modules:
            self._seen_modules.add(id(module))
            self.tracker.watch(module)  # its parameters now, after any .cuda() / .to()
        if self.kind != "forward":
            if self.kind == "backward":
                self.micro += 1  # another forward before the optimizer stepped: accumulation
            self._auto("forward", f"forward {self._suffix()}")

    def _forward_post(self, module, args, output) -> None:
        self.depth = max(0, self.depth - 1)

    def _wrap(self, fn):
        def tracked(*args, **kwargs):
            if not self.in_backward and self.kind != "backward":
                self._auto("backward", f"backward {self._suffix()}")
            self.in_backward += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.in_backward -= 1
                self.tracker.scan_roots()  # the gradients it made are gradients

        tracked.__wrapped__ = fn
        tracked.__doc__ = fn.__doc__
        return tracked

    def _wrap_zero(self, fn):
        def zero_grad(*args, **kwargs):
            if self.kind == "zero_grad":  # model.zero_grad() inside optimizer.zero_grad()
                return fn(*args, **kwargs)
            # inside a step (after its forward: the tutorial's zero_grad(); backward(); step())
            # it is that step's; between steps (backward(); step(); zero_grad()) the last one's
            within = self.kind in ("forward", "backward")
            n = self._suffix() if within else max(self.step - 1, 0)
            self._auto("zero_grad", f"zero_grad {n}")
            try:
                return fn(*args, **kwargs)
            finally:
                if not within:  # the step's backward comes next and names its own phase
                    self._auto("data", f"data {self.step}")

        zero_grad.__wrapped__ = fn
        zero_grad.__doc__ = fn.__doc__
        return zero_grad

    def _step_pre(self, optimizer, args, kwargs) -> None:
        for group in optimizer.param_groups:
            self.tracker.mark(list(group["params"]), "parameters")
        self._auto("step", f"step {self.step}")

    def _step_post(self, optimizer, args, kwargs) -> None:
        self.tracker.watch(optimizer)  # its state is optimizer state from now on
        self.step += 1
        self.micro = 0
        self._auto("data", f"data {self.step}")

    # ---- the script's own phases ------------------------------------------------------------------
    @contextmanager
    def custom(self, name: str):
        """`memlab.phase(name)`: a phase the script names. Nested, the innermost name shows.
        Closed, the automatic phase it interrupted goes on; if the hooks moved on inside it
        (an evaluation loop's forwards), what follows is `data N` until the next forward."""
        before = (self.kind, self.auto_name)
        self._custom.append(str(name))
        self.switch(str(name))
        try:
            yield
        finally:
            self._custom.pop()
            if self._custom:
                self.switch(self._custom[-1])
            elif (self.kind, self.auto_name) == before:
                self.switch(self.auto_name, setup=self.kind in SETUP_KINDS)
            else:  # the hooks moved on inside it (an eval loop's forwards): between steps now
                self._auto("data", f"data {self.step}")


__all__ = ["AutoPhases"]
