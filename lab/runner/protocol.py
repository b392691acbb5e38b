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
`{"request": RunRequest, "env": {name: value}}`. A request carries its wire format ("wire": 2)
and is decoded through the schema; the events below are checked against their classes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from lab.measure.modes import ModeInfo, mode_info
from lab.measure.spec import VariantSpec

if TYPE_CHECKING:
    from lab.course.curriculum import Lesson

# The request's format on the wire (runner -> service -> worker). Client and worker are one
# install, so there is no conversion: a request of another format is refused in one line.
WIRE = 2
KINDS = ("lesson", "experiment", "profile")


@dataclass
class RunRequest:
    """One variant to measure, with everything the worker needs, decided once by the client:
    the worker reads no lesson.toml and no recording (`for_lesson` fills a lesson's)."""

    lesson: str  # the lesson's id; for an experiment or a profile, the label its result carries
    variant: str  # the function of `experiment` that runs
    mode: str = "cpu"  # resolved already: cuda | cpu | sim
    scale: str = "small"
    # lesson: a lesson's experiment.py; experiment: any experiment file (the playground's generic
    # one, a challenge's attempt); profile: the wrapper that runs a script (lab/profile/script.py)
    kind: str = "lesson"
    experiment: str = ""  # the .py file to import
    params: dict[str, Any] = field(default_factory=dict)  # run.p: the scale's, overrides applied
    checks: list[dict[str, Any]] = field(default_factory=list)  # lesson.toml's [[checks]]
    # set in the worker before torch is imported (a lesson variant's `env`: lesson 17's
    # PYTORCH_CUDA_ALLOC_CONF, which torch reads once); in sim, only before the run's backend
    # is built (lab.runner.worker.needs_cold_start)
    env: dict[str, str] = field(default_factory=dict)
    gpu_memory: int | None = None  # virtual GPU capacity in bytes
    gpu: str | None = None  # sim: the card it stands for (a key of lab.measure.sim.gpus; the H200)
    profile_path: str | None = None  # save a memory_viz snapshot here
    timing: bool = True
    # seconds from the moment the run leaves the queue (worker start included, waiting not)
    timeout_s: float = 600.0
    # torch.distributed: one worker per rank, started like torchrun (gloo on cpu, nccl on cuda
    # with one GPU per rank); the result holds every rank in `RunResult.ranks`
    ranks: int = 1
    # cuda: alone on its GPU(s), whatever its expected peak (whole-GPU readings such as NVML's
    # used memory or utilisation, clean step times); a lesson says so with gpu = "exclusive"
    exclusive: bool = False
    # cuda: the reserved peak its H200 recording reached (bytes), what the runner service admits
    # it by; None: unknown (no recording, not a lesson), the whole GPU
    expected_peak: int | None = None
    # untimed runs behind the one the learner waits for (the app runs a lesson's sim variants
    # side by side): the worker lowers its CPU priority, so on a busy machine the first comes first
    background: bool = False

    @classmethod
    def for_lesson(cls, lesson: Lesson, variant: str, mode: str = "cpu", scale: str = "small",
                   *, overrides: dict[str, Any] | None = None, **kw: Any) -> RunRequest:
        """A lesson variant's request, every fact taken from the loaded `lesson` here, once.
        `overrides`: parameters to change (--gpus N's world_size); `kw`: the other fields
        (gpu_memory, timing, ...); a lesson's own `gpu_memory` parameter is its virtual GPU
        unless one is given. A variant the lesson lacks is the worker's to report."""
        params = {**lesson.params(scale), **(overrides or {})}
        try:
            env = dict(lesson.variant(variant).env)
        except KeyError:
            env = {}
        if kw.get("gpu_memory") is None and params.get("gpu_memory"):
            kw["gpu_memory"] = int(params["gpu_memory"])
        kw.setdefault("timeout_s", lesson.timeout_s)
        kw.setdefault("ranks", lesson.ranks(scale, mode, overrides))
        kw["exclusive"] = bool(kw.get("exclusive")) or lesson.exclusive
        if mode_info(mode).on_gpu and "expected_peak" not in kw:
            from .peaks import recorded_peak

            kw["expected_peak"] = recorded_peak(lesson.id, variant)
        return cls(lesson.id, variant, mode, scale, kind="lesson",
                   experiment=str(lesson.experiment_path), params=params,
                   checks=[dict(c) for c in lesson.checks], env=env, **kw)

    @property
    def mode_info(self) -> ModeInfo:
        """What its mode means (on a GPU, simulated, timed ...): the runner asks this."""
        return mode_info(self.mode)

    def spec(self) -> VariantSpec:
        """What the worker measures (lab.measure.measure's input)."""
        return VariantSpec(self.lesson, self.variant, self.scale, dict(self.params),
                           [dict(c) for c in self.checks], self.profile_path, self.timing)

    def to_json_dict(self) -> dict[str, Any]:
        return {"wire": WIRE, **asdict(self)}

    @classmethod
    def from_json_dict(cls, d: Any) -> RunRequest:
        """Decoded through the schema (lab.measure.schema): every field's type checked, a
        SchemaError (one line) for a request of another wire format or a field that is wrong."""
        from lab.measure.schema import SchemaError, decode

        if not isinstance(d, dict):
            raise SchemaError(f"a request is a JSON object, not {type(d).__name__}")
        if d.get("wire") != WIRE:
            raise SchemaError(f"request of wire format {d.get('wire')!r}; this worker reads "
                              f"{WIRE} (the client and the worker are of different installs)")
        req = decode(cls, d, "request")
        if req.kind not in KINDS:
            raise SchemaError(f"request.kind: {req.kind!r} is not one of {', '.join(KINDS)}")
        return req


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
