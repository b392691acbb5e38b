"""The phase vocabulary of a training run, 0-based, as the H200 recordings name phases.

    model                    building the model and the optimizer (a setup phase)
    data 0                   the batch of step 0 (a setup phase, category "inputs")
    forward 0 / backward 0   step 0; with accumulation per micro-batch: forward 0.0, forward 0.1
    step 0                   optimizer.step() (and the GradScaler's update)
    zero_grad 0              optimizer.zero_grad(...)
    eval 0                   an evaluation pass (no_grad)

Torch-free: the app aligns plots by these names, the engine only sees strings.
"""

from __future__ import annotations

import re

MODEL = "model"
KINDS = ("data", "forward", "backward", "step", "zero_grad", "eval")
_NAME = re.compile(r"^(data|forward|backward|step|zero_grad|eval) (\d+)(?:\.(\d+))?$")


def phase(kind: str, step: int, micro: int | None = None) -> str:
    """phase("forward", 0) -> "forward 0"; phase("forward", 0, 1) -> "forward 0.1"."""
    if kind not in KINDS:
        raise ValueError(f"unknown phase kind {kind!r}; use one of {', '.join(KINDS)}")
    return f"{kind} {step}" if micro is None else f"{kind} {step}.{micro}"


def parse_phase(name: str) -> tuple[str, int, int | None] | None:
    """"forward 0.1" -> ("forward", 0, 1); None for other names ("model", a lesson's own)."""
    m = _NAME.match(name)
    if not m:
        return None
    return m.group(1), int(m.group(2)), None if m.group(3) is None else int(m.group(3))


__all__ = ["KINDS", "MODEL", "parse_phase", "phase"]
