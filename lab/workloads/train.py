"""One training step and one evaluation step, with every technique a TrainConfig switches on.

Readable like nanoGPT's train loop. Each step is split into phases (`run.phase`, names from
lab/workloads/phases.py) so the memory timeline shows forward, backward, the optimizer step
and zero_grad separately:

    for micro-batch k:                          phase "forward {i}" / "forward {i}.{k}"
        with autocast:  out = model(x)          (B, T, V) logits, or (B, ..., d) outputs
                        loss = loss_fn(...) / micro_batches
        (scaler.scale(loss)).backward()         phase "backward {i}" / "backward {i}.{k}"
    (scaler.)step(optimizer)                    phase "step {i}"
    optimizer.zero_grad(set_to_none=...)        phase "zero_grad {i}"

Any task of lab/workloads/tasks.py trains here (a language model, the regression models);
data parallel (TrainConfig.parallel: ddp, zero1, fsdp) in lab/workloads/parallel.py.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING

import torch
from torch.utils.checkpoint import checkpoint

from .config import TrainConfig
from .models import blocks, lm_loss
from .optim import optimizer_spec
from .phases import MODEL, phase

if TYPE_CHECKING:
    from .tasks import Task


def param_dtype(cfg: TrainConfig) -> torch.dtype:
    """The dtype the model is built in: bf16 for pure-bf16, else fp32 (autocast casts copies)."""
    return torch.bfloat16 if cfg.precision == "pure-bf16" else torch.float32


def autocast(device: torch.device, precision: str):
    """`torch.autocast` for bf16/fp16, a no-op otherwise (fp32, and pure-bf16: no casts)."""
    if precision not in ("bf16", "fp16"):
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(device: torch.device, precision: str):
    """fp16 gradients underflow without loss scaling. The scaler reads values (inf checks), so
    it is made on CUDA only; its memory is a few scalars."""
    if precision == "fp16" and device.type == "cuda":
        return torch.amp.GradScaler("cuda")
    return None


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    """The optimizer `cfg` names (lab/workloads/optim.py), sized to the model's dtype."""
    itemsize = next(model.parameters()).element_size()
    return optimizer_spec(cfg, itemsize).build(model.parameters())


def enable_checkpointing(model, how: str) -> None:
    """Recompute each block's activations in backward instead of keeping them.

    "blocks": wrap every block in `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)`
    by hand; "hf": the same through transformers' `gradient_checkpointing_enable()`.
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
    for block in blocks(model):
        plain = block.forward

        def forward(*args, _plain=plain, **kwargs):
            return checkpoint(_plain, *args, use_reentrant=False, **kwargs)

        block.forward = forward  # an instance attribute: nn.Module.__call__ finds it first


def setup(run, task: Task, cfg: TrainConfig, *, with_optimizer: bool = True):
    """Build model (+ optimizer) in a setup phase; returns (model, optimizer, scaler)."""
    with run.phase(MODEL, setup=True):
        model = task.build(run.device, param_dtype(cfg))
        how = cfg.checkpointing
        if how == "blocks":  # the ckpt token: the task says how (HFModel: transformers' own)
            how = getattr(task, "checkpointing", "blocks")
        enable_checkpointing(model, how)
        opt = make_optimizer(model, cfg) if with_optimizer else None
    return model, opt, make_scaler(run.device, cfg.precision)


def get_batch(run, task: Task, step: int, split: str = "train", dtype: torch.dtype = torch.float32):
    with run.phase(phase("data", step), category="inputs", setup=True):
        return task.get(step, run.device, dtype, split=split)


def train_step(run, model, opt, scaler, x, y, cfg: TrainConfig, i: int,
               loss_fn=lm_loss) -> torch.Tensor:
    """One optimizer step over (x, y) (B, ...), as `cfg.micro_batches` micro-batches."""
    n = cfg.micro_batches
    if x.size(0) % n:
        raise ValueError(f"batch {x.size(0)} does not split into {n} equal micro-batches")
    total = None
    for k, (xm, ym) in enumerate(zip(x.chunk(n), y.chunk(n))):
        micro = None if n == 1 else k
        with run.phase(phase("forward", i, micro)):
            with autocast(run.device, cfg.precision):
                loss = loss_fn(model, xm, ym) / n  # mean over the whole batch, like n == 1
        with run.phase(phase("backward", i, micro)):
            (scaler.scale(loss) if scaler else loss).backward()
        total = loss.detach() if total is None else total + loss.detach()
    with run.phase(phase("step", i)):
        if scaler:
            scaler.step(opt)  # unscales the grads, skips the step if any is inf/nan
            scaler.update()
        else:
            opt.step()
    with run.phase(phase("zero_grad", i)):
        opt.zero_grad(set_to_none=cfg.set_to_none)
    return total


def train(run, task: Task, cfg: TrainConfig, steps: int) -> list:
    """`steps` optimizer steps; records the first and last loss as metrics (not in sim).
    ddp / zero1 / fsdp: on `run.p.world_size` ranks (lab/workloads/parallel.py)."""
    if cfg.parallel != "none":
        from .parallel import train_parallel

        return train_parallel(run, task, cfg, steps)
    model, opt, scaler = setup(run, task, cfg)
    losses = []
    for i in range(steps):
        x, y = get_batch(run, task, i, dtype=param_dtype(cfg))
        loss = train_step(run, model, opt, scaler, x, y, cfg, i, task.loss)
        losses.append(loss)
    if not run.simulated:
        run.metric("loss_first", run.item(losses[0]))
        run.metric("loss_last", run.item(losses[-1]))
    return losses


def eval_step(run, model, x, y, cfg: TrainConfig, i: int, loss_fn=lm_loss,
              grad_mode: str = "no_grad") -> torch.Tensor:
    """The loss of (x, y) with autograd on ("grad"), under no_grad, or under inference_mode."""
    ctx = {"grad": nullcontext, "no_grad": torch.no_grad,
           "inference_mode": torch.inference_mode}[grad_mode]
    with run.phase(phase("eval", i)), ctx(), autocast(run.device, cfg.precision):
        return loss_fn(model, x, y)


def evaluate(run, task: Task, cfg: TrainConfig, steps: int) -> None:
    """`steps` evaluation passes on the eval split (model.eval(), no optimizer)."""
    model, _, _ = setup(run, task, cfg, with_optimizer=False)
    model.eval()
    for i in range(steps):
        x, y = get_batch(run, task, i, split="eval", dtype=param_dtype(cfg))
        loss = eval_step(run, model, x, y, cfg, i, task.loss)
        run.metric("loss", run.item(loss))


__all__ = ["autocast", "enable_checkpointing", "eval_step", "evaluate", "get_batch",
           "make_optimizer", "make_scaler", "param_dtype", "setup", "train", "train_step"]
