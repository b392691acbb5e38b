"""How to train: `TrainConfig`, built from a combination string such as `bf16+ckpt+accum4`.

A token means exactly one thing on every workload, and that thing is what PyTorch does by
default on CUDA, so a cpu or sim run does what a GPU run would (e.g. AdamW's foreach
implementation is forced everywhere: on CPU PyTorch would pick a for-loop with different
temporaries). `TOKENS` is the one table of tokens; `--help`, error messages and the docs are
made from it. Torch-free: the CLI and the app parse combinations without importing torch.

Extension points (later issues add rows here and a field below whose default means "off"):
LoRA, 8-bit optimizers and a chunked loss (issue 12). Distributed training (`ddp`, `zero1`,
`fsdp`: kind "parallel", issue 13) is one: `TrainConfig.parallel`, run by
lab/workloads/parallel.py on `world_size` ranks (memlab compare/fit --gpus N). The step that reads the new field lives in
lab/workloads/train.py; `Workload.supports` says which workloads accept the new kind.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any


class ComboError(ValueError):
    """A combination that cannot be parsed or makes no sense here; one line."""


@dataclass(frozen=True)
class Token:
    name: str  # what the user types ("accumN" stands for accum2, accum4, ...)
    kind: str  # the choice it makes; two tokens of one kind in a combination conflict
    meaning: str  # one line: the PyTorch this token switches on


# the optimizers' settings, the same on every workload (lab/workloads/optim.py builds them); the
# lessons quote them: lr, and AdamW's weight decay 0.1 as in nanoGPT
LR = 1e-3
BETAS = (0.9, 0.999)
ADAMW_WEIGHT_DECAY = 0.1
MOMENTUM = 0.9

TOKENS: tuple[Token, ...] = (
    Token("baseline", "", "AdamW (foreach), fp32, no checkpointing, one batch per step, "
          "zero_grad(set_to_none=True): PyTorch's defaults on CUDA"),
    Token("adamw", "optimizer", f"torch.optim.AdamW(lr={LR}, betas={BETAS}, weight_decay="
          f"{ADAMW_WEIGHT_DECAY}): 2 state tensors per parameter (the baseline's optimizer)"),
    Token("adam", "optimizer", f"torch.optim.Adam(lr={LR}, betas={BETAS}, weight_decay=0): "
          "2 state tensors per parameter"),
    Token("sgd", "optimizer", f"torch.optim.SGD(lr={LR}, momentum=0): plain SGD, no state"),
    Token("momentum", "optimizer", f"torch.optim.SGD(lr={LR}, momentum={MOMENTUM}): 1 state "
          "tensor per parameter"),
    Token("foreach", "impl", "the optimizer's foreach=True implementation (CUDA's default; "
          "forced on cpu and sim too)"),
    Token("fused", "impl", "the optimizer's fused=True implementation: one kernel per update"),
    Token("forloop", "impl", "foreach=False: the optimizer loops over parameters in Python"),
    Token("bf16", "precision", "torch.autocast(dtype=torch.bfloat16) around forward and loss; "
          "weights, gradients and optimizer state stay fp32 (with fsdp: the same bf16 compute "
          "over fp32 shards, by FSDP2's MixedPrecisionPolicy(param_dtype=bfloat16, "
          "reduce_dtype=float32))"),
    Token("fp16", "precision", "torch.autocast(dtype=torch.float16) + torch.amp.GradScaler "
          "(the scaler on CUDA only: it reads values)"),
    Token("pure-bf16", "precision", "the model in torch.bfloat16, no autocast: weights, "
          "gradients and optimizer state all bf16"),
    Token("ckpt", "checkpointing", "activation checkpointing per block: "
          "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)"),
    Token("accumN", "accum", "gradient accumulation: N micro-batches of batch/N per optimizer "
          "step (e.g. accum4)"),
    Token("zero_grads", "set_to_none", "optimizer.zero_grad(set_to_none=False): the gradients "
          "stay allocated, filled with zeros"),
    Token("eval", "eval", "evaluation only: forward under torch.no_grad(), no backward, no "
          "optimizer (combine only with a precision)"),
    Token("ddp", "parallel", "DistributedDataParallel(model) on --gpus N ranks, each its own "
          "batch: every rank holds the whole model, its gradients, the optimizer state and "
          "DDP's gradient buckets"),
    Token("zero1", "parallel", "DDP + ZeroRedundancyOptimizer(optimizer_class=...): the "
          "optimizer state split across the --gpus N ranks (whole tensors per rank)"),
    Token("fsdp", "parallel", "FSDP2: fully_shard(block) per transformer block, then "
          "fully_shard(model): parameters, gradients and optimizer state split 1/N across the "
          "--gpus N ranks, each block all-gathered just before it runs"),
    Token("offload", "offload", "with fsdp: fully_shard(..., offload_policy=CPUOffloadPolicy()): "
          "the shards and their gradients in pinned host memory, the optimizer state on the "
          "host, the optimizer step on the CPU; each block's shards are copied to the GPU "
          "before its all-gather (sim or GPUs; not recorded on GPUs yet)"),
)
KINDS = tuple(dict.fromkeys(t.kind for t in TOKENS if t.kind))  # what Workload.supports names
_BY_NAME = {t.name: t for t in TOKENS}
_ACCUM = re.compile(r"^accum(\d+)$")

PRECISIONS = ("fp32", "bf16", "fp16", "pure-bf16")
CHECKPOINTING = ("none", "blocks", "hf")
OPTIMIZERS = ("adamw", "adam", "sgd", "momentum")
IMPLS = ("foreach", "fused", "forloop")
PARALLEL = ("none", "ddp", "zero1", "fsdp")
OFFLOAD = ("none", "cpu")


def tokens_help(width: int = 12) -> str:
    """The token table as text (the --help epilog of `memlab compare` and `memlab fit`)."""
    lines = ["combination tokens (join with '+', e.g. bf16+ckpt+accum4; the first --combo is "
             "the baseline of the comparison):"]
    lines += [f"  {t.name:<{width}} {t.meaning}" for t in TOKENS]
    return "\n".join(lines)


def tokens_markdown() -> str:
    """The token table as Markdown (docs/WORKLOADS.md holds it; a test keeps it current)."""
    rows = ["| token | what it switches on |", "|---|---|"]
    rows += [f"| `{t.name}` | {t.meaning} |" for t in TOKENS]
    return "\n".join(rows)


@dataclass(frozen=True)
class TrainConfig:
    """One combination of techniques. The defaults are `baseline`."""

    precision: str = "fp32"  # fp32 | bf16, fp16 (autocast) | pure-bf16 (the model in bf16)
    checkpointing: str = "none"  # none | blocks (checkpoint() per block) | hf (transformers')
    micro_batches: int = 1  # accumN: a batch of B runs as N micro-batches of B/N
    optimizer: str = "adamw"  # adamw | adam | sgd (no momentum) | momentum (SGD, 0.9)
    impl: str = "foreach"  # foreach (one kernel per op over all params) | fused | forloop
    lr: float = LR
    set_to_none: bool = True  # zero_grad(set_to_none=...): free the gradients, or zero them
    eval: bool = False  # forward only, under torch.no_grad()
    parallel: str = "none"  # ddp | zero1 | fsdp: data parallel on world_size ranks
    offload: str = "none"  # cpu: FSDP2's CPUOffloadPolicy (pinned host memory); fsdp only

    def __post_init__(self):
        for name, allowed in (("precision", PRECISIONS), ("checkpointing", CHECKPOINTING),
                              ("optimizer", OPTIMIZERS), ("impl", IMPLS),
                              ("parallel", PARALLEL), ("offload", OFFLOAD)):
            if getattr(self, name) not in allowed:
                raise ComboError(f"TrainConfig.{name}={getattr(self, name)!r}; use one of "
                                 f"{', '.join(allowed)}")
        if self.offload != "none" and self.parallel != "fsdp":
            raise ComboError("offload is FSDP2's CPUOffloadPolicy: use it with fsdp")
        if not isinstance(self.micro_batches, int) or not 1 <= self.micro_batches <= 1024:
            raise ComboError(f"TrainConfig.micro_batches must be 1..1024, not {self.micro_batches!r}")

    @property
    def label(self) -> str:
        """The canonical spelling: `ckpt+bf16` and `bf16+ckpt` are the same run."""
        parts: list[str] = []
        if self.parallel != "none":
            parts.append(self.parallel)
        if self.offload != "none":
            parts.append("offload")
        if self.eval:
            parts.append("eval")
        if self.precision != "fp32":
            parts.append(self.precision)
        if self.checkpointing == "blocks":
            parts.append("ckpt")
        elif self.checkpointing == "hf":
            parts.append("hf-ckpt")  # the lessons' transformers switch; not a token
        if self.micro_batches > 1:
            parts.append(f"accum{self.micro_batches}")
        if self.optimizer != "adamw":
            parts.append(self.optimizer)
        if self.impl != "foreach":
            parts.append(self.impl)
        if not self.set_to_none:
            parts.append("zero_grads")
        return "+".join(parts) or "baseline"

    def kinds(self) -> set[str]:
        """Which kinds of token this combination uses (checked against Workload.supports)."""
        default = TrainConfig()
        used = {kind for kind, name in (("precision", "precision"),
                                        ("checkpointing", "checkpointing"),
                                        ("accum", "micro_batches"), ("optimizer", "optimizer"),
                                        ("impl", "impl"), ("set_to_none", "set_to_none"),
                                        ("eval", "eval"), ("parallel", "parallel"),
                                        ("offload", "offload"))
                if getattr(self, name) != getattr(default, name)}
        return used

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def parse_combo(text: str) -> TrainConfig:
    """'bf16+ckpt+accum4' -> TrainConfig. Raises ComboError naming the bad token."""
    cfg = TrainConfig()
    raw = str(text).strip().lower()
    seen: dict[str, str] = {}
    for tok in re.split(r"[+,\s]+", raw):
        if not tok or tok == "baseline":
            continue
        m = _ACCUM.match(tok)
        token = _BY_NAME.get("accumN" if m else tok)
        if token is None or tok == "accumn":
            raise ComboError(f"{text!r}: unknown token {tok!r}; the tokens: "
                             f"{', '.join(t.name for t in TOKENS)} (memlab compare --help)")
        if token.kind in seen:
            raise ComboError(f"{text!r}: {tok!r} and {seen[token.kind]!r} both choose the "
                             f"{token.kind}; keep one")
        seen[token.kind] = tok
        if m:
            n = int(m.group(1))
            if not 1 <= n <= 1024:
                raise ComboError(f"{text!r}: accumulation steps must be 1..1024, not {n}")
            cfg = replace(cfg, micro_batches=n)
        elif token.kind == "precision":
            cfg = replace(cfg, precision=tok)
        elif token.kind == "checkpointing":
            cfg = replace(cfg, checkpointing="blocks")
        elif token.kind in ("optimizer", "impl"):
            cfg = replace(cfg, **{token.kind: tok})
        elif token.kind == "set_to_none":
            cfg = replace(cfg, set_to_none=False)
        elif token.kind == "eval":
            cfg = replace(cfg, eval=True)
        elif token.kind == "parallel":
            cfg = replace(cfg, parallel=tok)
    if "offload" in seen:  # after the loop: the tokens come in any order
        if cfg.parallel != "fsdp":
            raise ComboError(f"{text!r}: offload is FSDP2's CPUOffloadPolicy: use it with fsdp "
                             "(fsdp+offload)")
        cfg = replace(cfg, offload="cpu")
    if cfg.eval and cfg.kinds() - {"eval", "precision"}:
        raise ComboError(f"{text!r}: eval runs no backward and no optimizer; combine it only "
                         "with bf16, fp16 or pure-bf16")
    if cfg.parallel != "none" and cfg.micro_batches > 1:
        raise ComboError(f"{text!r}: {cfg.parallel} with gradient accumulation is not supported "
                         "yet (it needs no_sync() / set_requires_gradient_sync(False))")
    if cfg.parallel == "fsdp" and cfg.precision == "fp16":
        raise ComboError(f"{text!r}: fsdp+fp16 needs a sharded GradScaler; use fsdp+bf16")
    return cfg


def parse_combos(texts: list[str]) -> list[TrainConfig]:
    """Parse a list; the first is the baseline of a comparison. Duplicates are an error."""
    combos = [parse_combo(t) for t in texts]
    labels = [c.label for c in combos]
    dup = next((label for label in labels if labels.count(label) > 1), None)
    if dup:
        raise ComboError(f"the combination {dup!r} is given twice")
    return combos


__all__ = ["CHECKPOINTING", "ComboError", "IMPLS", "KINDS", "OFFLOAD", "OPTIMIZERS", "PARALLEL", "PRECISIONS", "TOKENS",
           "Token", "TrainConfig", "parse_combo", "parse_combos", "tokens_help",
           "tokens_markdown"]
