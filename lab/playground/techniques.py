"""Technique combinations: what the playground switches on, parsed from `bf16+ckpt+accum4`.

A combination is a small frozen value; its `label` is the canonical spelling (the variant name of
its result), so `ckpt+bf16` and `bf16+ckpt` are the same run. The empty combination is the
baseline: float32 weights in the workload's dtype, no autocast, AdamW in PyTorch's default
implementation, `zero_grad(set_to_none=True)` (PyTorch's default since 2.0).

    token          what it changes
    bf16 | fp16    autocast the forward in that dtype (fp16 adds a GradScaler on CUDA/CPU)
    ckpt           activation checkpointing per block (recompute in backward)
    accumN         gradient accumulation: N micro-batches of batch/N per optimizer step
    sgd|adam|adamw the optimizer (default adamw)
    foreach|fused|forloop   its implementation (default: PyTorch's choice)
    zero_grads     zero_grad(set_to_none=False): gradients stay allocated between steps
    eval           evaluation only: forward under torch.no_grad(), no backward, no optimizer
    ddp|zero1|fsdp data parallel on --gpus N ranks (lab/experiments/parallel.py): DDP;
                   DDP + ZeroRedundancyOptimizer; FSDP2 fully_shard per block. With fsdp, bf16
                   is FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) — the
                   same bf16 compute over fp32 weights, done by the all-gather instead of
                   autocast. (These move to lab/workloads' token table with the workloads merge.)
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any

AMP = ("bf16", "fp16")
OPTIMIZERS = ("adamw", "adam", "sgd")
PARALLEL = ("ddp", "zero1", "fsdp")
IMPLS = ("default", "foreach", "fused", "forloop")
TOKENS_HELP = ("baseline, bf16, fp16, ckpt, accumN (e.g. accum4), sgd, adam, adamw, foreach, "
               "fused, forloop, zero_grads, eval, ddp, zero1, fsdp — joined with '+', e.g. "
               "bf16+ckpt+accum4 or fsdp+bf16")
_ACCUM = re.compile(r"^accum(?:[=:]?)(\d+)$")

# what each kind of technique needs from a workload (Workload.supports)
KINDS = ("amp", "ckpt", "accum", "optimizer", "set_to_none", "eval", "parallel")


class ComboError(ValueError):
    """A combination that cannot be parsed or makes no sense; one line."""


@dataclass(frozen=True)
class Techniques:
    amp: str | None = None  # "bf16" | "fp16"
    ckpt: bool = False
    accum: int = 1
    optimizer: str = "adamw"
    impl: str = "default"
    set_to_none: bool = True
    eval: bool = False
    parallel: str = "none"  # "ddp" | "zero1" | "fsdp": on --gpus N ranks

    @property
    def label(self) -> str:
        parts: list[str] = []
        if self.parallel != "none":
            parts.append(self.parallel)
        if self.eval:
            parts.append("eval")
        if self.amp:
            parts.append(self.amp)
        if self.ckpt:
            parts.append("ckpt")
        if self.accum > 1:
            parts.append(f"accum{self.accum}")
        if self.optimizer != "adamw":
            parts.append(self.optimizer)
        if self.impl != "default":
            parts.append(self.impl)
        if not self.set_to_none:
            parts.append("zero_grads")
        return "+".join(parts) or "baseline"

    def kinds(self) -> set[str]:
        """Which kinds of technique this combination uses (for Workload.supports)."""
        used = set()
        if self.amp:
            used.add("amp")
        if self.ckpt:
            used.add("ckpt")
        if self.accum > 1:
            used.add("accum")
        if self.optimizer != "adamw" or self.impl != "default":
            used.add("optimizer")
        if not self.set_to_none:
            used.add("set_to_none")
        if self.eval:
            used.add("eval")
        if self.parallel != "none":
            used.add("parallel")
        return used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Techniques":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def parse_combo(text: str) -> Techniques:
    """'bf16+ckpt+accum4' -> Techniques. Raises ComboError naming the bad token."""
    t = Techniques()
    raw = str(text).strip().lower()
    if raw in ("", "baseline", "base", "none"):
        return t
    seen: set[str] = set()
    for tok in re.split(r"[+,\s]+", raw):
        if not tok or tok in ("baseline", "base"):
            continue
        m = _ACCUM.match(tok)
        kind = ("accum" if m else "amp" if tok in AMP else "optimizer" if tok in OPTIMIZERS
                else "impl" if tok in IMPLS else "parallel" if tok in PARALLEL else tok)
        if kind in seen:
            raise ComboError(f"{text!r}: {tok!r} repeats a choice already made in this combination")
        seen.add(kind)
        if m:
            n = int(m.group(1))
            if not 1 <= n <= 1024:
                raise ComboError(f"{text!r}: accumulation steps must be 1..1024, not {n}")
            t = replace(t, accum=n)
        elif tok in AMP:
            t = replace(t, amp=tok)
        elif tok in ("ckpt", "checkpoint", "checkpointing"):
            t = replace(t, ckpt=True)
        elif tok in OPTIMIZERS:
            t = replace(t, optimizer=tok)
        elif tok in IMPLS:
            t = replace(t, impl=tok)
        elif tok in ("zero_grads", "zero-grads", "no_set_to_none"):
            t = replace(t, set_to_none=False)
        elif tok == "set_to_none":
            t = replace(t, set_to_none=True)
        elif tok in ("eval", "no_grad", "no-grad"):
            t = replace(t, eval=True)
        elif tok in PARALLEL:
            t = replace(t, parallel=tok)
        else:
            raise ComboError(f"{text!r}: unknown technique {tok!r}; use {TOKENS_HELP}")
    if t.eval and (t.accum > 1 or t.optimizer != "adamw" or t.impl != "default"
                   or not t.set_to_none or t.ckpt):
        raise ComboError(f"{text!r}: eval runs no backward and no optimizer; combine it only "
                         "with bf16/fp16")
    if t.parallel != "none" and (t.eval or t.accum > 1):
        raise ComboError(f"{text!r}: {t.parallel} trains; it does not combine with "
                         + ("eval" if t.eval else "gradient accumulation (not supported yet)"))
    if t.parallel == "fsdp" and t.amp == "fp16":
        raise ComboError(f"{text!r}: fsdp+fp16 needs a sharded GradScaler; use fsdp+bf16")
    return t


def parse_combos(texts: list[str]) -> list[Techniques]:
    """Parse a list; the first is the baseline of the comparison. Duplicates are an error."""
    combos = [parse_combo(t) for t in texts]
    labels = [c.label for c in combos]
    dup = next((l for l in labels if labels.count(l) > 1), None)
    if dup:
        raise ComboError(f"the combination {dup!r} is given twice")
    return combos


__all__ = ["AMP", "ComboError", "IMPLS", "KINDS", "OPTIMIZERS", "PARALLEL", "TOKENS_HELP", "Techniques",
           "parse_combo", "parse_combos"]
