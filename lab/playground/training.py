"""One training (or evaluation) loop with technique switches, shared by every workload.

Plain PyTorch, readable like the lessons: the switches are the ones a practitioner flips —
`torch.autocast`, a `GradScaler` for fp16, activation checkpointing (the model reads
`model.checkpointing`), gradient accumulation, the optimizer and its implementation,
`zero_grad(set_to_none=...)`, and evaluation under `torch.no_grad()`.

Phases per step: `forward N` / `backward N` (`.k` per micro-batch with accumulation),
`optimizer N`, `zero_grad N`; or `eval N`. Building the model and the data are `setup` phases,
left out of the step time.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import torch

from .techniques import Techniques

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
          "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def dtype_of(name: str) -> torch.dtype:
    return DTYPES[name]


def make_optimizer(model: torch.nn.Module, t: Techniques) -> torch.optim.Optimizer:
    kwargs: dict = {}
    if t.impl == "foreach":
        kwargs["foreach"] = True
    elif t.impl == "forloop":
        kwargs["foreach"] = False
    elif t.impl == "fused":
        kwargs["fused"] = True
    params = model.parameters()
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kwargs)
    if t.optimizer == "adam":
        return torch.optim.Adam(params, lr=1e-4, **kwargs)
    return torch.optim.AdamW(params, lr=1e-4, **kwargs)


def autocast_for(run, t: Techniques):
    if not t.amp:
        return nullcontext()
    return torch.autocast(run.device.type, dtype=AMP_DTYPES[t.amp])


def run_steps(run, model: torch.nn.Module, batch: tuple[torch.Tensor, ...],
              loss_fn: Callable[..., torch.Tensor], t: Techniques) -> None:
    """`run.p.steps` optimizer steps (or evaluation passes) of `loss_fn(model, *batch)`."""
    model.checkpointing = t.ckpt  # the workloads' models look at this in forward()
    steps = int(getattr(run.p, "steps", 2))
    if t.eval:
        model.eval()
        for s in range(1, steps + 1):
            with run.phase(f"eval {s}"), torch.no_grad(), autocast_for(run, t):
                loss = loss_fn(model, *batch)
            run.metric("loss", run.item(loss.float()))
            del loss
        return
    opt = make_optimizer(model, t)
    scaler = None
    if t.amp == "fp16" and not run.simulated:  # the scaler reads values: nothing to read in sim
        scaler = torch.amp.GradScaler(run.device.type)
    elif t.amp == "fp16":
        run.note("sim: the fp16 GradScaler is left out (it reads values); its memory is a few "
                 "scalars")
    n = batch[0].shape[0]
    if n % t.accum:
        raise ValueError(f"batch {n} is not divisible by accum{t.accum}")
    micro = n // t.accum
    for s in range(1, steps + 1):
        for k in range(t.accum):
            part = tuple(b[k * micro:(k + 1) * micro] for b in batch)  # views, no copy
            tag = f"{s}.{k + 1}" if t.accum > 1 else f"{s}"
            with run.phase(f"forward {tag}"), autocast_for(run, t):
                loss = loss_fn(model, *part) / t.accum
            with run.phase(f"backward {tag}"):
                (scaler.scale(loss) if scaler else loss).backward()
            run.metric("loss", run.item(loss.detach().float() * t.accum))
            del loss, part
        with run.phase(f"optimizer {s}"):
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
        with run.phase(f"zero_grad {s}"):
            opt.zero_grad(set_to_none=t.set_to_none)


__all__ = ["DTYPES", "dtype_of", "make_optimizer", "run_steps"]
