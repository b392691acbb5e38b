"""One training step and one evaluation step, with every technique the lessons compare.

Readable like nanoGPT's train loop. Each step is split into phases (`run.phase`) so the memory
timeline shows forward, backward, the optimizer step and zero_grad separately:

    for micro-batch k:                          phase "forward {i}" / "forward {i}.{k}"
        with autocast:  logits = model(x)       (B, T, V)
                        loss = cross_entropy(logits, y) / micro_batches
        (scaler.scale(loss)).backward()         phase "backward {i}" / "backward {i}.{k}"
    (scaler.)step(optimizer)                    phase "step {i}"
    optimizer.zero_grad(set_to_none=...)        phase "zero_grad {i}"
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .data import lm_batch
from .models import Layout, build_model, layout, transformer_blocks

PRECISIONS = ("fp32", "bf16", "fp16")
CHECKPOINTING = ("none", "blocks", "hf")
OPTIMIZERS = ("sgd", "momentum", "adamw")
IMPLS = ("foreach", "fused", "for-loop")


@dataclass
class TrainConfig:
    precision: str = "fp32"  # fp32 | bf16 (autocast) | fp16 (autocast + GradScaler on CUDA)
    checkpointing: str = "none"  # none | blocks (torch.utils.checkpoint per block) | hf
    micro_batches: int = 1  # split each batch into this many, accumulating gradients
    optimizer: str = "adamw"  # sgd | momentum (SGD, 0.9) | adamw
    impl: str = "foreach"  # foreach (one kernel per op over all params) | fused | for-loop
    lr: float = 1e-3
    set_to_none: bool = True  # zero_grad(set_to_none=...): free the grads, or fill them with 0

    def __post_init__(self):
        for name, allowed in (("precision", PRECISIONS), ("checkpointing", CHECKPOINTING),
                              ("optimizer", OPTIMIZERS), ("impl", IMPLS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"TrainConfig.{name}={getattr(self, name)!r}; use one of "
                                 f"{', '.join(allowed)}")
        if self.micro_batches < 1:
            raise ValueError("TrainConfig.micro_batches must be at least 1")


@dataclass
class Workload:
    """What to train: a layout and the batch shape."""

    layout: str = "gpt2-124m"  # see lab.experiments.models.LAYOUTS
    batch: int = 8  # B, sequences per optimizer step (the effective batch)
    seq: int = 1024  # T, tokens per sequence
    config: TrainConfig = field(default_factory=TrainConfig)


def autocast(device: torch.device, precision: str):
    """`torch.autocast` for bf16/fp16, a no-op for fp32 (device-agnostic)."""
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(device: torch.device, precision: str):
    """fp16 gradients underflow without loss scaling; a GradScaler only exists for CUDA here."""
    if precision == "fp16" and device.type == "cuda":
        return torch.amp.GradScaler("cuda")
    return None


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    impl = {"foreach": dict(foreach=True), "fused": dict(fused=True),
            "for-loop": dict(foreach=False)}[cfg.impl]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1, **impl)
    momentum = 0.9 if cfg.optimizer == "momentum" else 0.0
    return torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=momentum, **impl)


def enable_checkpointing(model, how: str) -> None:
    """Recompute each block's activations in backward instead of keeping them.

    "blocks": wrap every transformer block in `torch.utils.checkpoint.checkpoint(...,
    use_reentrant=False)` by hand; "hf": the same through transformers'
    `gradient_checkpointing_enable()`.
    """
    if how == "none":
        return
    if how == "hf":
        kwargs = {"use_reentrant": False}
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x's new name
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:  # the long-standing name (deprecated in 5.x, removed in v6)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        return
    for block in transformer_blocks(model):
        plain = block.forward

        def forward(*args, _plain=plain, **kwargs):
            return checkpoint(_plain, *args, use_reentrant=False, **kwargs)

        block.forward = forward  # an instance attribute: nn.Module.__call__ finds it first


def lm_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x).logits  # (B, T, V)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))  # scalar, fp32


def setup(run, work: Workload, *, with_optimizer: bool = True):
    """Build model (+ optimizer) in a setup phase; returns (layout, model, optimizer, scaler)."""
    lay = layout(work.layout)
    with run.phase("model", setup=True):
        model = build_model(lay, run.device)
        enable_checkpointing(model, work.config.checkpointing)
        opt = make_optimizer(model, work.config) if with_optimizer else None
    return lay, model, opt, make_scaler(run.device, work.config.precision)


def get_batch(run, lay: Layout, work: Workload, step: int, split: str = "train"):
    with run.phase(f"data {step}", category="inputs", setup=True):
        return lm_batch(lay, work.batch, work.seq, step, run.device, split=split)


def train_step(run, model, opt, scaler, x, y, cfg: TrainConfig, i: int) -> torch.Tensor:
    """One optimizer step over (x, y) (B, T), as `cfg.micro_batches` micro-batches."""
    n = cfg.micro_batches
    if x.size(0) % n:
        raise ValueError(f"batch {x.size(0)} does not split into {n} equal micro-batches")
    total = None
    for k, (xm, ym) in enumerate(zip(x.chunk(n), y.chunk(n))):
        tag = f"{i}" if n == 1 else f"{i}.{k}"
        with run.phase(f"forward {tag}"):
            with autocast(run.device, cfg.precision):
                loss = lm_loss(model, xm, ym) / n  # mean over the whole batch, like n == 1
        with run.phase(f"backward {tag}"):
            (scaler.scale(loss) if scaler else loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
    with run.phase(f"step {i}"):
        if scaler:
            scaler.step(opt)  # unscales the grads, skips the step if any is inf/nan
            scaler.update()
        else:
            opt.step()
    with run.phase(f"zero_grad {i}"):
        opt.zero_grad(set_to_none=cfg.set_to_none)
    return total


def train(run, work: Workload, steps: int, *, model=None, opt=None, scaler=None) -> list:
    """`steps` optimizer steps; records the first and last loss as metrics (not in sim)."""
    lay = layout(work.layout)
    if model is None:
        lay, model, opt, scaler = setup(run, work)
    losses = []
    for i in range(steps):
        x, y = get_batch(run, lay, work, i)
        loss = train_step(run, model, opt, scaler, x, y, work.config, i)
        losses.append(loss)
    if not run.simulated:
        run.metric("loss_first", run.item(losses[0]))
        run.metric("loss_last", run.item(losses[-1]))
    return losses


def eval_loss(run, model, x, y, grad_mode: str = "no_grad", precision: str = "fp32",
              name: str = "eval") -> torch.Tensor:
    """The loss of (x, y) with autograd on ("grad"), under no_grad, or under inference_mode."""
    ctx = {"grad": nullcontext, "no_grad": torch.no_grad,
           "inference_mode": torch.inference_mode}[grad_mode]
    with run.phase(name), ctx(), autocast(run.device, precision):
        return lm_loss(model, x, y)
