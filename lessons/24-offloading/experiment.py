"""Lesson 24: offloading saved activations to host memory on one GPU — device memory saved,
host memory used, step time paid.

The same GPT-2 training step under bf16 autocast, four ways:

    baseline                   autograd keeps every saved activation on the GPU
    save_on_cpu                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                                   loss = model(x) ...       # each saved tensor is copied to
                                                             # pinned host memory in forward and
                                                             # back to the GPU in backward
    checkpointing              model.activation_checkpointing_enable(...)  # keep each layer's
                                                             # input only, recompute the rest
    offloaded_checkpointing    model.activation_checkpointing_enable(..., offload=True)
                                                             # transformers (5.24): the kept
                                                             # inputs go to pinned host memory

Where the installed transformers has no `offload=` (older 5.x), offloaded_checkpointing does by
hand what it does: every checkpointed layer runs inside save_on_cpu(pin_memory=True).

What is measured where: the tensor tracker counts device storages (cuda) - the pinned host
copies are not in the plot; `torch.cuda.host_memory_stats()` (the pinned allocator's counters)
gives them as metrics (`pinned_*`). In sim the same calls reach the lab's models (the saved
tensors leave the device; pinned blocks are rounded up to a power of two and cached, as
PyTorch's host allocator does: lab/measure/sim/kernels/offload.py). On the CPU there is no device
to offload from: save_on_cpu copies CPU tensors to the CPU.
"""

import inspect
from contextlib import nullcontext

import torch
from torch.utils.checkpoint import checkpoint

from lab.workloads import TrainConfig
from lab.workloads.phases import phase
from lab.workloads.tasks import LM
from lab.workloads.train import autocast, enable_checkpointing, get_batch, setup


def pinned_stats(run) -> dict:
    """The pinned-host allocator's counters: CUDA's, or the model's in sim; {} on the CPU."""
    if not run.cuda_kernels or not hasattr(torch.cuda, "host_memory_stats"):
        return {}
    return torch.cuda.host_memory_stats()


def enable_offloaded_checkpointing(run, model) -> None:
    if not run.cuda_kernels:
        # transformers' offload asks for pinned memory, which needs an accelerator
        run.note("On the CPU there is no device to offload from: plain checkpointing runs.")
        enable_checkpointing(model, "hf")
        return
    enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    kwargs = {"use_reentrant": False}
    if "offload" in inspect.signature(enable).parameters:
        name = "activation_checkpointing_kwargs" if enable.__name__.startswith("activation") \
            else "gradient_checkpointing_kwargs"
        enable(**{name: kwargs}, offload=True)
        return
    run.note("This transformers has no activation_checkpointing_enable(offload=True): each "
             "checkpointed layer runs inside save_on_cpu(pin_memory=True) by hand, as "
             "transformers 5.24 does.")

    def offloaded(function, *args, **kw):
        with torch.autograd.graph.save_on_cpu(pin_memory=True):
            return checkpoint(function, *args, **{**kwargs, **kw})

    model._set_gradient_checkpointing(enable=True, gradient_checkpointing_func=offloaded)


def train(run, *, save_on_cpu=False, checkpointing=None):
    task = LM(run.p.layout, run.p.batch, run.p.seq)
    model, opt, _ = setup(run, task, TrainConfig(precision="bf16"))
    if checkpointing == "recompute":
        enable_checkpointing(model, "hf")
    elif checkpointing == "offload":
        enable_offloaded_checkpointing(run, model)
    if save_on_cpu and not run.cuda_kernels:
        run.note("On the CPU, save_on_cpu copies CPU tensors to the CPU: nothing leaves a device.")
    offload = (lambda: torch.autograd.graph.save_on_cpu(pin_memory=True)) if save_on_cpu else nullcontext
    for i in range(run.p.steps):
        x, y = get_batch(run, task, i)
        with run.phase(phase("forward", i)):
            with offload(), autocast(run.device, "bf16"):
                loss = task.loss(model, x, y)  # (B, T, V) logits inside; the saved tensors go
                                               # to the host as autograd saves them
        with run.phase(phase("backward", i)):
            loss.backward()  # each saved tensor comes back to the GPU when its op needs it
        with run.phase(phase("step", i)):
            opt.step()
        with run.phase(phase("zero_grad", i)):
            opt.zero_grad(set_to_none=True)
    st = pinned_stats(run)
    if st:
        # pinned blocks handed out at once (peak), and what the allocator still holds, cached
        run.metric("pinned_active_peak", st.get("active_bytes.peak", 0))
        run.metric("pinned_held", st.get("allocated_bytes.current", 0))


def baseline(run):
    train(run)


def save_on_cpu(run):
    train(run, save_on_cpu=True)


def checkpointing(run):
    train(run, checkpointing="recompute")


def offloaded_checkpointing(run):
    train(run, checkpointing="offload")
