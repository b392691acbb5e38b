"""The private PyTorch APIs of sim's compiled estimate (lab/measure/sim/compiled, issue 41):
Dynamo, AOTAutograd and Inductor, thin shims only, in the form of lab/measure/torch_compat.py.

torch_compat holds every other private name; these live apart because only `torch.compile`'s
estimate needs them, and Dynamo and Inductor take seconds to import: importing this module
imports torch only, each shim imports its part of the compiler when it is called.
tests/unit/test_torch_compat.py treats this module as a shim module like torch_compat (the only
two that may name private torch APIs) and checks that `CHECKED` names every shim below.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .torch_compat import CHECKED_ON, PrivateApi

INDUCTOR = "Inductor's compile_fx, run by sim up to its code generation (sim/compiled/capture)"
CHECKED: list[PrivateApi] = [
    PrivateApi("dynamo_skip_dir", "torch._dynamo.trace_rules.SKIP_DIRS, _recompile_re",
               "the lab's own frames (tracker, fake mode, facade) run as they are, never traced, "
               "like torch's own (what trace_rules.add does for a module, for a folder)", "2.13"),
    PrivateApi("current_function_modes / pop_function_mode / push_function_mode",
               "torch.overrides._get_current_function_mode_stack, "
               "torch._C._pop_torch_function_stack, _push_on_torch_function_stack",
               "the CUDA facade's placement mode off the stack while Dynamo traces a region "
               "(it would trace into the mode), put back after", "2.13"),
    PrivateApi("module_call_impl", "torch.nn.Module._wrapped_call_impl",
               "torch's own Module.__call__ inside a region (the run's evaluation cap wraps it; "
               "Dynamo would break the graph at every module call)", "2.13"),
    PrivateApi("global_module_hooks", "torch.nn.modules.module._global_forward_pre_hooks, "
               "_global_forward_hooks", "the lab's global module hooks off inside a region "
               "(Dynamo would break the graph at each module to call them)", "2.13"),
    PrivateApi("is_compile_disabled", "the _torchdynamo_disable mark torch.compiler.disable puts "
               "on what it returns", "a function wrapped once, not again at every call", "2.13"),
    PrivateApi("inductor_compile", "torch._inductor.compile_fx.compile_fx, "
               "torch._functorch.config (force_non_lazy_backward_lowering, "
               "enable_autograd_cache), torch._inductor.config (fx_graph_cache, freezing)",
               f"{INDUCTOR}: its last step sim's; the backward compiled with the forward, no "
               "cache (every region compiled, seen), no freezing", "2.13"),
    PrivateApi("inductor_post_grad_passes", "torch._inductor.compile_fx: "
               "_recursive_post_grad_passes, fake_tensor_prop; torch._inductor.fx_passes."
               "post_grad.view_to_reshape; torch._inductor.virtualized.V.set_fake_mode",
               f"{INDUCTOR}: what _InProcessFxCompile.codegen_and_compile runs on a graph before "
               "it lowers it (in place ops again, no-ops gone, pattern rewrites)", "2.13"),
    PrivateApi("traced_forward_outputs", "torch._guards.TracingContext.try_get().fw_metadata"
               ".num_forward", "how many of a forward graph's outputs are the user's (the rest: "
               "saved for the backward)", "2.13"),
    PrivateApi("BOXED_CALL", "the _boxed_call flag AOTAutograd reads on a compiled artifact "
               "(torch._functorch: make_boxed_func sets it)", "sim's graph runner takes its "
               "inputs in a list it clears, so the backward's saved tensors die inside it",
               "2.13"),
    PrivateApi("HigherOrderOperator / disable_autocast", "torch._ops.HigherOrderOperator, "
               "torch._C._DisableAutocast", "a graph's higher-order ops (the RNG pair of a "
               "recomputed op) run as their meaning; autocast off while a graph runs (it holds "
               "its casts already, as Inductor's code does)", "2.13"),
]


# ---- Dynamo -----------------------------------------------------------------------------------
def dynamo_skip_dir(path: str) -> None:
    """Frames of files under `path` are in Dynamo's skip list: run as they are, never traced."""
    from torch._dynamo import trace_rules

    if path not in trace_rules.SKIP_DIRS:
        trace_rules.SKIP_DIRS.append(path)
        trace_rules._recompile_re()


def current_function_modes() -> list:
    """The TorchFunctionModes active on this thread, outermost first."""
    return list(torch.overrides._get_current_function_mode_stack())


def pop_function_mode() -> None:
    torch._C._pop_torch_function_stack()


def push_function_mode(mode) -> None:
    torch._C._push_on_torch_function_stack(mode)


def module_call_impl() -> Callable | None:
    """torch's own `nn.Module.__call__` (what it is bound to before anything wraps it), or None."""
    return torch.nn.Module.__dict__.get("_wrapped_call_impl")


def global_module_hooks() -> list[dict]:
    """The dicts of module hooks every module runs (register_module_forward(_pre)_hook)."""
    from torch.nn.modules import module as nn_module

    return [h for h in (getattr(nn_module, name, None) for name in
                        ("_global_forward_pre_hooks", "_global_forward_hooks")) if h is not None]


def is_compile_disabled(fn) -> bool:
    """`fn` is what torch.compiler.disable returned."""
    return bool(getattr(fn, "_torchdynamo_disable", False))


# ---- AOTAutograd and Inductor -------------------------------------------------------------------
BOXED_CALL = "_boxed_call"
HigherOrderOperator = torch._ops.HigherOrderOperator
disable_autocast = torch._C._DisableAutocast


def inductor_compile(gm: torch.fx.GraphModule, example_inputs, inner_compile: Callable) -> Any:
    """Inductor's compile_fx with `inner_compile` as its last step, the backward compiled with
    the forward, no caches and no freezing."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    with functorch_config.patch(force_non_lazy_backward_lowering=True,
                                enable_autograd_cache=False), \
            inductor_config.patch(fx_graph_cache=False, freezing=False):
        return compile_fx(gm, example_inputs, inner_compile=inner_compile)


def inductor_post_grad_passes(gm: torch.fx.GraphModule, example_inputs,
                              is_inference: bool) -> None:
    """What Inductor runs on a graph before it lowers it (torch/_inductor/compile_fx.py,
    _InProcessFxCompile.codegen_and_compile): views that cannot be views made reshapes,
    fake-tensor propagation, then the post-grad passes, in place on `gm`."""
    from torch._inductor.compile_fx import _recursive_post_grad_passes, fake_tensor_prop
    from torch._inductor.fx_passes.post_grad import view_to_reshape
    from torch._inductor.virtualized import V

    view_to_reshape(gm)
    with torch.no_grad():
        fake_mode = fake_tensor_prop(gm, example_inputs)
    with V.set_fake_mode(fake_mode):
        _recursive_post_grad_passes(gm, is_inference=is_inference)


def traced_forward_outputs() -> int | None:
    """While AOTAutograd compiles a forward: how many of its outputs are the user's (the rest
    are saved for the backward); None outside or where this torch does not say."""
    from torch._guards import TracingContext

    meta = getattr(TracingContext.try_get(), "fw_metadata", None)
    return getattr(meta, "num_forward", None)


__all__ = [
    "CHECKED", "CHECKED_ON", "PrivateApi", "dynamo_skip_dir", "current_function_modes",
    "pop_function_mode", "push_function_mode", "module_call_impl", "global_module_hooks",
    "is_compile_disabled", "BOXED_CALL", "HigherOrderOperator", "disable_autocast",
    "inductor_compile", "inductor_post_grad_passes", "traced_forward_outputs",
]
