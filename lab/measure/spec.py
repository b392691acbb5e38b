"""`VariantSpec`: what one measurement is of, whatever the mode (torch-free: the runner's
request builds it, lab.runner.protocol.RunRequest.spec, and lab.measure.measure measures it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class VariantSpec:
    """What is measured, whatever the mode."""

    lesson: str  # the lesson's id (or a label: playground, profile), the result's `lesson`
    variant: str
    scale: str
    params: dict[str, Any]  # run.p
    checks: list[dict] = field(default_factory=list)  # lesson.toml's [[checks]]
    profile_path: str | None = None  # a memory_viz snapshot of the run, written here
    timing: bool = True  # run the timed pass (where the mode times steps)

    @property
    def checked_phases(self) -> set[str]:
        return {c["phase"] for c in self.checks if c.get("measure", "delta") == "delta"}


__all__ = ["VariantSpec"]
