"""`torch.compile` in sim's estimate pass: Dynamo and AOTAutograd trace the region on fake
tensors, Inductor's partitioner and decompositions decide the graphs, and sim runs the graphs.

What a script's `torch.compile(model)` returns here is what the real call returns (an
`OptimizedModule`, or a wrapped function), compiled with a backend of sim's own: Inductor's
`compile_fx` (pre-grad passes, `select_decomp_table()`'s decompositions, the joint-graph passes
and `min_cut_rematerialization_partition`, exactly as Inductor runs them), whose last step, code
generation, is replaced by `runner.compiled_graph`: the post-grad passes, then a `GraphRunner`
that runs the graph on the fake tensors with Inductor's buffers (fusion.py). The backward is
compiled with the forward (`force_non_lazy_backward_lowering`), while Dynamo has every dispatch
mode off. Graph breaks need nothing of their own: Dynamo runs the code between graphs eagerly,
under the tracker, and compiles each graph separately.

Two things sim's run has on that Dynamo must not see, during each call of the compiled region:
  - the lab's tracker is a TorchDispatchMode, and Dynamo runs a frame eagerly while one is on
    the stack unless the mode says `ignore_compile_internals()`; the tracker says so for the call
    (Dynamo then takes every mode off while it compiles and runs the compiled graphs under them);
  - the CUDA facade's placement is a TorchFunctionMode, which Dynamo would trace into; it is off
    for the call, and the values the code between graphs reads (`bool(t)`, `t.item()`) are
    answered by the facade as before (stand-ins, logged).

The graphs are CPU graphs (sim's fake tensors are CPU tensors), so CUDA's choices come from the
kernels sim already registers: SDPA's AutogradCPU kernel picks CUDA's attention op while
AOTAutograd traces (lab.measure.sim.kernels.sdpa), and CUDA autocast's op lists are the
AutocastCPU kernels the trace runs through (lab.measure.sim.kernels.autocast).
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ...torch_compat import FakeTensor, TorchDispatchMode, current_dispatch_modes
from ...torch_compat_compile import (current_function_modes, dynamo_skip_dir, global_module_hooks,
                                     inductor_compile, is_compile_disabled, module_call_impl,
                                     pop_function_mode, push_function_mode)
from ...tracker import TensorTracker
from .runner import compiled_graph
from .stats import CompileStats

NOT_ESTIMATED_MODES = ("reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_VALUE_READS = ("__bool__", "item", "__float__", "__int__", "__index__", "tolist")


def supported() -> str | None:
    """None, or why this torch cannot estimate (the tracker must be able to say
    `ignore_compile_internals`, read by Dynamo since torch 2.9)."""
    if not hasattr(TorchDispatchMode, "ignore_compile_internals"):
        return f"torch {torch.__version__} has no TorchDispatchMode.ignore_compile_internals"
    return None


def compile_for_estimate(original, target, stats: CompileStats, placement=None, library=None,
                         **kwargs):
    """What `torch.compile(target, **kwargs)` returns in the estimate pass (`original`: the real
    torch.compile; `placement`: a function returning the facade's placement mode at call time;
    `library`: a function that takes sim's patches of libraries out for the region's call and
    returns the function that puts them back: Dynamo traces the library's own code, as on the
    GPU). A mode whose memory sim cannot estimate (CUDA graphs' pool, autotuning) is
    noted and the region runs eagerly."""
    mode = kwargs.get("mode")
    if mode in NOT_ESTIMATED_MODES:
        stats.not_estimated(f'mode="{mode}"')
        return target if target is not None else (lambda fn: fn)
    if kwargs.get("backend") not in (None, "inductor"):
        stats.not_estimated(f"backend={kwargs['backend']!r}")
        return target if target is not None else (lambda fn: fn)
    _lab_never_compiled()
    if target is None:  # @torch.compile(...) as a decorator factory
        return lambda fn: compile_for_estimate(original, fn, stats, placement, library, **kwargs)
    backend = functools.partial(_backend, stats=stats)
    keep = {k: kwargs[k] for k in ("fullgraph", "dynamic") if k in kwargs}
    undo = _plain_module_call()  # what Dynamo's module wrapper binds is torch's own __call__
    try:
        compiled = original(target, backend=backend, **keep)
    finally:
        for owner, name, old in undo:
            setattr(owner, name, old)
    if isinstance(compiled, torch.nn.Module):  # OptimizedModule: its forward is Dynamo's
        compiled.forward = _region(compiled.forward, stats, placement, library)
        return compiled
    return _region(compiled, stats, placement, library)


def _lab_never_compiled() -> None:
    """memlab's own frames (the tracker's __torch_dispatch__, sim's fake mode and facade) are
    in Dynamo's skip list, as torch's own are: where Dynamo runs a frame eagerly (a graph break
    in a loop skips the whole frame) every frame it calls passes Dynamo's frame callback, and
    the lab's must run as they are, not be traced."""
    dynamo_skip_dir(str(Path(__file__).resolve().parents[3]))


def _region(fn, stats: CompileStats, placement, library=None):
    """`fn` (Dynamo's entry) called with the tracker saying it ignores compile internals and the
    facade's placement mode off (module docstring)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        trackers = [m for m in current_dispatch_modes() if isinstance(m, TensorTracker)]
        for t in trackers:
            t.ignore_compile_internals = _yes
        modes = current_function_modes()
        for _ in modes:
            pop_function_mode()
        mode = placement() if placement is not None else None
        undo = _answer_values(mode) if mode is not None else []
        undo += _device_read_not_traced() + _plain_module_call() + _lab_hooks_off()
        put_back = library() if library is not None else None
        stats.calls += 1
        try:
            return fn(*args, **kwargs)
        finally:
            if put_back is not None:
                put_back()
            for owner, name, old in undo:
                setattr(owner, name, old)
            for m in modes:
                push_function_mode(m)
            for t in trackers:
                t.__dict__.pop("ignore_compile_internals", None)

    return call


def _yes() -> bool:
    return True


def _plain_module_call() -> list:
    """torch's own `nn.Module.__call__` inside the region: the run's evaluation cap
    (lab.profile.steps.EvalCap) wraps it for passes with autograd off, and Dynamo, which skips
    memlab's frames, would break the graph at every module call into it. A compiled region's
    evaluation passes are therefore never capped (each runs)."""
    module = torch.nn.Module
    plain = module_call_impl()
    current = module.__dict__.get("__call__")
    if plain is None or current is plain:
        return []
    module.__call__ = plain
    return [(module, "__call__", current)]


def _lab_hooks_off() -> list:
    """memlab's global module hooks (sim's RNN watch) off inside the region: Dynamo would break
    the graph at each module to call them (an RNN inside a compiled region is not noted)."""
    undo = []
    for hooks in global_module_hooks():
        if not hooks:
            continue
        mine = {k: h for k, h in hooks.items() if _is_lab(h)}
        if mine:
            saved = dict(hooks)
            for k in mine:
                del hooks[k]
            undo.append((_Restore(hooks, saved), "items", None))
    return undo


class _Restore:
    """An undo entry for a dict put back whole (capture's undo list sets attributes)."""

    def __init__(self, target: dict, saved: dict):
        self.target, self.saved = target, saved

    def __setattr__(self, name, value):
        if name == "items":
            self.target.clear()
            self.target.update(self.saved)
        else:
            object.__setattr__(self, name, value)


def _is_lab(fn) -> bool:
    return (getattr(fn, "__module__", None) or "").split(".")[0] == "lab"


def _device_read_not_traced() -> list:
    """The facade's `FakeTensor.device` (a Python property that looks at its caller's frame)
    run as it is, never compiled: Dynamo would otherwise compile its frame when eager code
    between graphs reads a device, and fail there."""
    prop = FakeTensor.__dict__.get("device")
    if not isinstance(prop, property) or is_compile_disabled(prop.fget):
        return []
    FakeTensor.device = property(torch.compiler.disable(prop.fget, recursive=True), prop.fset,
                                 prop.fdel, prop.__doc__)
    return [(FakeTensor, "device", prop)]


def _answer_values(placement) -> list:
    """While the placement mode is off: values of fake tensors read between graphs are the
    facade's stand-ins (lab.measure.sim.facade.placement), as when it is on."""
    undo = []
    for name in _VALUE_READS:
        old = getattr(torch.Tensor, name)

        def read(t, *a, _old=old, **kw):
            if type(t) is FakeTensor:
                return placement._value(_old, (t, *a), kw)
            return _old(t, *a, **kw)

        undo.append((torch.Tensor, name, old))
        # Dynamo must not trace into the facade: a read is a graph break, run eagerly
        setattr(torch.Tensor, name, torch.compiler.disable(read, recursive=True))
    return undo


def _backend(gm: torch.fx.GraphModule, example_inputs, stats: CompileStats):
    """The Dynamo backend: Inductor's compile_fx with sim's last step (module docstring)."""
    stats.dynamo_graph(gm)
    return inductor_compile(gm, example_inputs, functools.partial(compiled_graph, stats=stats))


__all__ = ["NOT_ESTIMATED_MODES", "compile_for_estimate", "supported"]
