"""What to train: a model, its batches and its loss, at given sizes.

    LM("gpt2-124m", batch=8, seq=1024)        a causal LM; batches of token ids (B, T)
    Linear(batch=5000, d_in=10_000, d_out=50_000)       MSE regression through one nn.Linear
    MLP(batch=16, seq=1024, d_model=2048, hidden_mult=4, layers=24)   MSE through MLP blocks
    HFModel("llama-3.2-1b", batch=4, seq=1024)  a config.json; the plain HF loop's loss

`task_for(workload, sizes)` makes the task a registered workload names. The train and eval steps
(lab/workloads/train.py) take any task: building, batches and the loss are all a task knows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .data import ids_batch, lm_batch, tensor_batch
from .models import LinearModel, MLPStack, build_hf, build_model, hf_loss, lm_loss, mse_loss
from .registry import Layout, Workload, layout


@dataclass
class LM:
    layout: str | Layout = "gpt2-124m"  # a name in lab.workloads.registry.LAYOUTS (or a Layout)
    batch: int = 8  # B, sequences per optimizer step (the effective batch; per rank with ranks)
    seq: int = 1024  # T, tokens per sequence
    seed: int = 0  # which batches: data-parallel ranks each draw their own (seed = rank)

    @property
    def shape(self) -> Layout:
        return self.layout if isinstance(self.layout, Layout) else layout(self.layout)

    def build(self, device, dtype: torch.dtype = torch.float32):
        return build_model(self.shape, device, dtype)

    def get(self, step: int, device, dtype=None, split: str = "train"):
        """(x, y) token ids, each (B, T); dtype is the model's, not the ids'."""
        return lm_batch(self.shape, self.batch, self.seq, step, device, seed=self.seed,
                        split=split)

    loss = staticmethod(lm_loss)


@dataclass
class HFModel:
    """A causal LM from a config.json (a shipped name or a path), trained as a user would:
    `model(input_ids=ids, labels=ids).loss` (transformers shifts the labels itself)."""

    model: str = "llama-3.2-1b"  # a shipped name or a path (lab.workloads.hf_config.config_path)
    batch: int = 4  # B
    seq: int = 1024  # T
    checkpointing = "hf"  # what the ckpt token means here: transformers' gradient checkpointing

    def _dict(self) -> dict:
        from .hf_config import check_seq, read_config

        d = read_config(self.model, simulated=_simulated())
        check_seq(d, self.seq, self.model)
        return d

    def build(self, device, dtype: torch.dtype = torch.float32):
        return build_hf(self._dict(), device, dtype)

    def get(self, step: int, device, dtype=None, split: str = "train"):
        """(ids, ids), each (B, T): random token ids of the config's vocabulary."""
        vocab = int(self._dict()["vocab_size"])
        ids = ids_batch(self.batch, self.seq, vocab, step + (10_000 if split != "train" else 0),
                        device)
        return ids, ids

    loss = staticmethod(hf_loss)


def _simulated() -> bool:
    """Is this running under FakeTensorMode (sim)? Mixture-of-experts configs are refused there."""
    from lab.measure.torch_compat import FakeTensorMode, current_dispatch_modes

    return any(isinstance(m, FakeTensorMode) for m in current_dispatch_modes())


@dataclass
class Linear:
    batch: int = 256  # B
    d_in: int = 512
    d_out: int = 2048

    def build(self, device, dtype: torch.dtype = torch.float32):
        return LinearModel(self.d_in, self.d_out, device=device, dtype=dtype)

    def get(self, step: int, device, dtype=torch.float32, split: str = "train"):
        return tensor_batch((self.batch, self.d_in), (self.batch, self.d_out), device, dtype)

    loss = staticmethod(mse_loss)


@dataclass
class MLP:
    batch: int = 4  # B
    seq: int = 64  # T
    d_model: int = 128  # d
    hidden_mult: int = 4  # the hidden width is hidden_mult × d
    layers: int = 4

    def build(self, device, dtype: torch.dtype = torch.float32):
        return MLPStack(self.layers, self.d_model, self.hidden_mult * self.d_model, device, dtype)

    def get(self, step: int, device, dtype=torch.float32, split: str = "train"):
        shape = (self.batch, self.seq, self.d_model)  # (B, T, d)
        return tensor_batch(shape, shape, device, dtype)

    loss = staticmethod(mse_loss)


TASKS = {"lm": LM, "linear": Linear, "mlp": MLP, "hf": HFModel}
Task = LM | Linear | MLP | HFModel


def task_for(workload: Workload, sizes: dict[str, Any]) -> Task:
    """The task a workload names at these sizes (unknown sizes are an error, not ignored)."""
    cls = TASKS[workload.family]
    known = set(cls.__dataclass_fields__)
    wanted = {k: v for k, v in sizes.items() if k not in ("steps",)}
    extra = set(wanted) - known
    if extra:
        raise ValueError(f"workload {workload.name!r} has no size {', '.join(sorted(extra))}; "
                         f"its sizes: {', '.join(sorted(known | {'steps'}))}")
    return cls(**wanted)


__all__ = ["HFModel", "LM", "Linear", "MLP", "TASKS", "Task", "task_for"]
