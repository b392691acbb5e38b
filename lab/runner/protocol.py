"""The wire between client and worker: one JSON object per line on the worker's stdout.

  {"type": "started", "pid", "lesson", "variant", "mode", "scale", "device"}
  {"type": "phase",   "name", "live_bytes"}
  {"type": "sample",  "t", "live_bytes", "phase", "events"}        (~10 per second)
  {"type": "result",  "result": RunResult.to_dict()}
  {"type": "error",   "error": "one line"}                            (the worker could not run)

The experiment's own prints go to stderr, never here, so they cannot corrupt the stream.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunRequest:
    lesson_path: str  # the lesson folder
    variant: str
    mode: str = "cpu"  # resolved already: cuda | cpu | sim
    scale: str = "small"
    gpu_memory: int | None = None  # virtual GPU capacity in bytes
    profile_path: str | None = None  # cuda: save profile.pkl here
    timing: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)  # parameters to change
    timeout_s: float = 600.0
    # Not a lesson: the path of an experiment .py to import instead (the playground's generic
    # experiment). Then `lesson_path` is only a label (its last part names the result's
    # `lesson`), `overrides` are all the parameters, and there are no checks.
    experiment: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> "RunRequest":
        return cls(**d)
