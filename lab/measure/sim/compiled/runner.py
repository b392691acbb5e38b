"""A compiled graph run on sim's fake tensors as Inductor's code would allocate (fusion.Plan).

`GraphRunner` stands where Inductor's compiled module stands: AOTAutograd calls it with the
graph's inputs in a list (the boxed calling convention: it clears the list, so the backward's
saved tensors die inside the graph, as Inductor's wrapper lets them), and it returns the graph's
outputs. It runs the FX graph node by node on sim's fake tensors under whatever dispatch modes
are on (at run time: the lab's tracker and sim's fake mode): a node whose output is a buffer in
the plan runs under the tracker and is counted; a node Inductor would inline into a kernel runs
with the tracker off the stack (its fake result has no memory on the GPU); every value is
dropped right after its last reader ran, so a buffer lives from its kernel to its last reader.
Autocast is off inside (the graph already holds its casts, as Inductor's code does).
"""

from __future__ import annotations

import torch

from ...torch_compat import current_dispatch_modes, pop_dispatch_mode, push_dispatch_mode
from ...torch_compat_compile import (BOXED_CALL, HigherOrderOperator, disable_autocast,
                                     inductor_post_grad_passes, traced_forward_outputs)
from ...tracker import TensorTracker
from .fusion import Plan, plan


def _tracker():
    """The lab's tracker on the dispatch-mode stack at run time, and how many modes are above it
    (AOTAutograd puts a mode of its own on top during a graph's first call)."""
    modes = current_dispatch_modes()
    for depth, mode in enumerate(reversed(modes)):
        if isinstance(mode, TensorTracker):
            return mode, [m for m in modes[len(modes) - depth:]]
    return None, []


def _untracked(fn, args, kwargs, tracker, above):
    """fn(*args, **kwargs) with the tracker taken off the stack (the modes above it stay)."""
    for _ in range(len(above) + 1):
        pop_dispatch_mode()
    for m in above:
        push_dispatch_mode(m)
    try:
        return fn(*args, **kwargs)
    finally:
        for _ in above:
            pop_dispatch_mode()
        push_dispatch_mode(tracker)
        for m in above:
            push_dispatch_mode(m)


def _higher_order(hop, args, kwargs, tracker, above):
    """The higher-order ops AOTAutograd leaves in a graph, run as their meaning: the RNG pair of
    a recomputed random op (checkpointing, the partitioner) runs the op; the saved RNG state is
    a few bytes on the host, made untracked. Another one runs as it is (the tracker off, said
    by the error if it refuses)."""
    name = hop.name()
    if name == "run_and_save_rng_state":
        op, *rest = args
        state = (_untracked(torch.get_rng_state, (), {}, tracker, above) if tracker is not None
                 else torch.get_rng_state())
        return state, op(*rest, **kwargs)
    if name == "run_with_rng_state":
        _state, op, *rest = args
        return op(*rest, **kwargs)
    if tracker is not None:
        return _untracked(hop, args, kwargs, tracker, above)
    return hop(*args, **kwargs)


class GraphRunner:
    """The compiled artifact of one graph (forward, backward or inference)."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str, stats, num_forward: int | None = None):
        # AOTAutograd hands the inputs as a list this may clear; an instance attribute, so the
        # wrappers Dynamo puts around a backward (functools.wraps copies __dict__) keep it
        setattr(self, BOXED_CALL, True)
        self.gm, self.kind, self.stats = gm, kind, stats
        self.num_forward = num_forward  # forward: outputs before the saved tensors
        self.plan: Plan = plan(gm.graph)
        self.order = [n for n in gm.graph.nodes]
        self._drop_after: dict[int, list] = {}
        for n, last in self.plan.last_reader.items():
            self._drop_after.setdefault(last, []).append(n)
        stats.saw(self)

    # the OutputCode interface Inductor's callers may use on a compiled artifact
    def post_compile(self, *args, **kwargs) -> None:
        pass

    def prepare_for_serialization(self) -> None:
        pass

    def set_triton_bundle(self, bundle) -> None:
        pass

    def __call__(self, args: list):
        env: dict = {}
        inputs = iter(args)
        for n in self.order:
            if n.op == "placeholder":
                env[n] = next(inputs)
        args.clear()  # the caller's references go: an input dies after its last reader
        tracker, above = _tracker()
        result = None
        with disable_autocast():
            for i, n in enumerate(self.order):
                if n.op == "placeholder":
                    pass
                elif n.op == "get_attr":
                    env[n] = getattr(self.gm, n.target)
                elif n.op == "output":
                    result = torch.fx.node.map_arg(n.args[0], lambda a: env[a])
                else:
                    a = torch.fx.node.map_arg(n.args, lambda a: env[a])
                    kw = torch.fx.node.map_arg(n.kwargs, lambda a: env[a])
                    if isinstance(n.target, HigherOrderOperator):
                        env[n] = _higher_order(n.target, a, kw, tracker, above)
                    elif tracker is not None and n not in self.plan.buffers:
                        # inlined into a kernel: no memory of its own
                        env[n] = _untracked(n.target, a, kw, tracker, above)
                    else:
                        env[n] = n.target(*a, **kw)
                    del a, kw
                for dead in self._drop_after.get(i, ()):
                    env.pop(dead, None)
        env.clear()
        return list(result) if isinstance(result, (list, tuple)) else [result]


def compiled_graph(gm: torch.fx.GraphModule, example_inputs, *, stats, is_backward=False,
                   is_inference=False, **_ignored) -> GraphRunner:
    """Inductor's `inner_compile` as sim runs it: the post-grad passes Inductor runs before it
    lowers the graph, then a `GraphRunner` instead of code."""
    kind = "backward" if is_backward else ("inference" if is_inference else "forward")
    _post_grad_passes(gm, example_inputs, is_inference, stats)
    num_forward = traced_forward_outputs() if kind == "forward" else None
    return GraphRunner(gm, kind, stats, num_forward)


def _post_grad_passes(gm, example_inputs, is_inference: bool, stats) -> None:
    """What `_InProcessFxCompile.codegen_and_compile` runs on the graph before lowering it
    (torch/_inductor/compile_fx.py): views that cannot be views made reshapes, fake-tensor
    propagation, then the post-grad passes (functional ops made in place again, no-ops removed,
    pattern rewrites). A pass that fails leaves the graph as AOTAutograd gave it (said)."""
    try:
        inductor_post_grad_passes(gm, example_inputs, is_inference)
    except Exception as e:  # noqa: BLE001 - an estimate without Inductor's rewrites, said
        stats.note(f"Inductor's post-grad passes failed ({type(e).__name__}); the graph was "
                   "run as AOTAutograd partitioned it")


__all__ = ["GraphRunner", "compiled_graph"]
