"""The one optimizer factory: a TrainConfig becomes an `OptimizerSpec`, the spec an optimizer.

    spec = optimizer_spec(cfg, param_itemsize=4)   # torch-free: what will be built, and its state
    opt = spec.build(model.parameters())           # torch.optim.AdamW(params, lr=1e-3, ...)

The spec is what a result reports (`params["optimizer"]`): the class, its settings, and the
analytic optimizer-state bytes per parameter: each state tensor (exp_avg, exp_avg_sq,
momentum_buffer) has the parameter's shape and dtype, so fp32 AdamW keeps 2 × 4 = 8 bytes per
parameter, SGD with momentum 4, plain SGD 0 (Adam's per-tensor `step` counters are scalars,
not per parameter). The result names what was built because the builder reads the spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import ADAMW_WEIGHT_DECAY, BETAS, MOMENTUM, TrainConfig

_CLASSES = {"adamw": "AdamW", "adam": "Adam", "sgd": "SGD", "momentum": "SGD"}
_STATE_TENSORS = {"adamw": 2, "adam": 2, "sgd": 0, "momentum": 1}  # parameter-shaped, each


@dataclass(frozen=True)
class OptimizerSpec:
    cls: str  # torch.optim.<cls>: AdamW | Adam | SGD
    lr: float
    betas: tuple[float, float] | None  # Adam(W) only
    weight_decay: float
    momentum: float | None  # SGD only
    foreach: bool | None  # None: not passed (PyTorch decides)
    fused: bool | None
    state_tensors: int  # per parameter tensor, each of the parameter's shape and dtype
    state_bytes_per_param: int  # state_tensors × the parameters' itemsize

    def kwargs(self) -> dict:
        """The keyword arguments the optimizer is built with (exactly these, nothing else)."""
        kw: dict = {"lr": self.lr}
        if self.cls in ("AdamW", "Adam"):
            if self.cls == "AdamW":  # Adam keeps PyTorch's default: no weight decay
                kw["weight_decay"] = self.weight_decay
        else:
            kw["momentum"] = self.momentum
        if self.foreach is not None:
            kw["foreach"] = self.foreach
        if self.fused is not None:
            kw["fused"] = self.fused
        return kw

    def build(self, params):
        """The torch optimizer (imports torch)."""
        import torch

        cls = {"AdamW": torch.optim.AdamW, "Adam": torch.optim.Adam, "SGD": torch.optim.SGD}[self.cls]
        return cls(params, **self.kwargs())

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas) if self.betas else None
        return d


def optimizer_spec(cfg: TrainConfig, param_itemsize: int | None = None) -> OptimizerSpec:
    """The optimizer `cfg` asks for; `param_itemsize` defaults to the config's parameter dtype."""
    itemsize = param_itemsize or param_itemsize_of(cfg)
    adam = cfg.optimizer in ("adamw", "adam")
    n = _STATE_TENSORS[cfg.optimizer]
    return OptimizerSpec(
        cls=_CLASSES[cfg.optimizer], lr=cfg.lr, betas=BETAS if adam else None,
        weight_decay=ADAMW_WEIGHT_DECAY if cfg.optimizer == "adamw" else 0.0,
        momentum=None if adam else (MOMENTUM if cfg.optimizer == "momentum" else 0.0),
        foreach={"foreach": True, "forloop": False, "fused": None}[cfg.impl],
        fused=True if cfg.impl == "fused" else None,
        state_tensors=n, state_bytes_per_param=n * itemsize)


def optimizer_info(cfg: TrainConfig) -> dict | None:
    """What a result reports under params["optimizer"]: the spec, or None for eval (no optimizer)."""
    return None if cfg.eval else optimizer_spec(cfg).to_dict()


def param_itemsize_of(cfg: TrainConfig) -> int:
    """Bytes per parameter element: fp32 unless the model itself is bf16 (pure-bf16)."""
    return 2 if cfg.precision == "pure-bf16" else 4


__all__ = ["OptimizerSpec", "optimizer_info", "optimizer_spec", "param_itemsize_of"]
