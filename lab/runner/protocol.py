"""The wire between client and worker: one JSON object per line on the worker's stdout.

  {"type": "ready",   "pid"}                                          (a warm worker: imports done)
  {"type": "started", "pid", "lesson", "variant", "mode", "scale", "device"}
  {"type": "phase",   "name", "live_bytes"}
  {"type": "sample",  "t", "live_bytes", "phase", "events"}        (~10 per second)
  {"type": "status",  "stage", "text"}                              (what is happening, in words)
  {"type": "result",  "result": RunResult.to_dict()}
  {"type": "error",   "error": "one line"}                            (the worker could not run)

The experiment's own prints go to stderr, never here, so they cannot corrupt the stream.

The runner adds "status" events of its own before a worker starts ("waiting for GPU 0 — 2
ahead", "starting worker", "worker ready"); with several ranks every event carries "rank".
A warm worker (`python -m lab.runner.worker --warm`) reads ONE line on stdin:
`{"request": RunRequest, "env": {name: value}}`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lab.measure.modes import ModeInfo, mode_info


@dataclass
class RunRequest:
    lesson_path: str  # the lesson folder
    variant: str
    mode: str = "cpu"  # resolved already: cuda | cpu | sim
    scale: str = "small"
    gpu_memory: int | None = None  # virtual GPU capacity in bytes
    gpu: str | None = None  # sim: the card it stands for (a key of lab.measure.sim.gpus; the H200)
    profile_path: str | None = None  # cuda: save profile.pkl here
    timing: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)  # parameters to change
    # seconds from the moment the run leaves the queue (worker start included, waiting not)
    timeout_s: float = 600.0
    # Not a lesson: the path of an experiment .py to import instead (the playground's generic
    # experiment). Then `lesson_path` is only a label (its last part names the result's
    # `lesson`), `overrides` are all the parameters, and there are no checks.
    experiment: str | None = None
    # torch.distributed: one worker per rank, started like torchrun (gloo on cpu, nccl on cuda
    # with one GPU per rank); the result holds every rank in `RunResult.ranks`
    ranks: int = 1
    # cuda: alone on its GPU(s), whatever its expected peak (whole-GPU readings such as NVML's
    # used memory or utilisation, clean step times); a lesson says so with gpu = "exclusive"
    exclusive: bool = False
    # untimed runs behind the one the learner waits for (the app runs a lesson's sim variants
    # side by side): the worker lowers its CPU priority, so on a busy machine the first comes first
    background: bool = False

    @property
    def mode_info(self) -> ModeInfo:
        """What its mode means (on a GPU, simulated, timed ...): the runner asks this."""
        return mode_info(self.mode)

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, d: dict[str, Any]) -> "RunRequest":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})  # newer clients' extra keys


# ---- the events, typed (every line a worker writes is decoded through these) ----------------------
@dataclass
class Ready:
    pid: int


@dataclass
class Started:
    pid: int
    lesson: str
    variant: str
    mode: str
    scale: str
    rank: int | None = None


@dataclass
class Phase:
    name: str
    live_bytes: int


@dataclass
class Sample:
    t: float
    live_bytes: int
    phase: str
    events: int


@dataclass
class Status:
    stage: str
    text: str


@dataclass
class Result:
    result: dict[str, Any]  # RunResult.to_dict(): decoded by RunResult.from_dict


@dataclass
class Error:
    error: str


EVENTS = {"ready": Ready, "started": Started, "phase": Phase, "sample": Sample,
          "status": Status, "result": Result, "error": Error}


def decode_event(msg: Any) -> dict[str, Any]:
    """`msg` checked against its event's fields (lab.measure.schema): the same dict back, or a
    SchemaError naming what is wrong. Keys an event does not declare pass through untouched
    (the runner adds "rank", status events carry "turn" or "ahead")."""
    from lab.measure.schema import SchemaError, decode

    if not isinstance(msg, dict):
        raise SchemaError(f"an event is a JSON object, not {type(msg).__name__}")
    kind = msg.get("type")
    cls = EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SchemaError(f"event type {kind!r} is not one of {', '.join(EVENTS)}")
    decode(cls, msg, f"{kind} event")
    return msg


def status(stage: str, text: str, **extra: Any) -> dict[str, Any]:
    """A runner status event: `text` is what a UI shows as it is."""
    return {"type": "status", "stage": stage, "text": text, **extra}
