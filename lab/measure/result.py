"""`RunResult`: what one variant of one lesson measured, in any mode.

This is the contract between the engine and everything that shows results (TUI, CLI, reference
files, tests). `to_dict()` / `from_dict()` round-trip through JSON; `from_dict` checks every
field's type (lab.measure.schema) and reads the schemas in `READS`; `SCHEMA` changes whenever a
field changes meaning. The JSON Schema of this contract ships as lab/measure/result.schema.json
(generated from these classes: `python -m lab.measure.result_schema`). The x axis of timelines is the allocation-event index ("allocation #"),
the same in every mode, so a sim curve and a CUDA curve of the same code line up; wall time is
kept beside it where it means something.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .modes import MODE_INFO, ModeInfo

# 2: `timing`, `versions`, `code_paths`, `compile_mode` added; `simulated` follows from `mode`
SCHEMA = 2
READS = (1, 2)  # schema 1: the recordings made before (its new fields take their defaults)
STATUSES = ("ok", "oom", "error", "timeout", "cancelled")


@dataclass
class DeviceInfo:
    name: str  # "NVIDIA H200", "CPU", "simulated (FakeTensorMode)"
    kind: str  # cuda | cpu | sim
    total_bytes: int | None = None  # capacity; None when unbounded (CPU RAM is not the point)
    virtual_bytes: int | None = None  # the --gpu-memory cap, when one was set


@dataclass
class Block:
    """One storage worth showing in the inspector: where it lived on the timeline."""

    nbytes: int
    category: str
    phase: str
    alloc_index: int
    free_index: int | None  # None: still live at the end
    stack: str = ""


@dataclass
class Peak:
    bytes: int = 0
    phase: str = ""
    index: int = -1  # event index of the peak
    by_category: dict[str, int] = field(default_factory=dict)
    top: list[Block] = field(default_factory=list)  # largest storages live at the peak


@dataclass
class PhaseStats:
    name: str
    start_bytes: int
    end_bytes: int
    peak_bytes: int
    delta_bytes: int  # end - start
    start_index: int = 0
    end_index: int = 0
    duration_s: float | None = None
    # cuda only: from the allocator's own counters (memory_stats), which include rounding
    allocated_delta_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    reserved_bytes: int | None = None
    # cuda, for checked phases: allocator blocks born in the phase and still held at its end,
    # split into blocks that back a tracked tensor and blocks that back none (workspaces)
    tensor_block_bytes: int | None = None
    other_block_sizes: list[int] | None = None


@dataclass
class Check:
    name: str
    expected_bytes: int
    measured_bytes: int
    source: str = ""  # what "measured" is: "tracked tensors", "allocator delta", ...
    note: str = ""  # the difference, named
    tensor_bytes: int | None = None  # cuda: what the tracker counted, beside the allocator's number

    @property
    def ratio(self) -> float:
        return self.measured_bytes / self.expected_bytes if self.expected_bytes else float("nan")


@dataclass
class Timeline:
    index: list[int] = field(default_factory=list)  # event index (x)
    t: list[float] = field(default_factory=list)  # seconds since start
    live: list[int] = field(default_factory=list)  # live bytes (y)
    by_category: dict[str, list[int]] = field(default_factory=dict)  # aligned with index
    phase_starts: list[tuple[str, int]] = field(default_factory=list)  # (phase, event index)
    events: int = 0  # how many events before downsampling


@dataclass
class Timing:
    """How `step_time_s` was measured: every timed step of the untracked pass, warm-up left out.

    `step_time_s` is their median; one run is faster than another only when every timed step
    of it is below every timed step of the other (lab.course.claims enforces that for "faster"/"slower")."""

    steps_s: list[float] = field(default_factory=list)  # each timed step, in order
    warmup_steps: int = 0  # steps run before the timed ones and left out
    method: str = ""  # e.g. "one synchronize per step, untracked pass"

    @property
    def median_s(self) -> float | None:
        xs = sorted(self.steps_s)
        if not xs:
            return None
        mid = len(xs) // 2
        return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2

    @property
    def spread_s(self) -> float | None:
        """max - min of the timed steps (None with fewer than two)."""
        return max(self.steps_s) - min(self.steps_s) if len(self.steps_s) > 1 else None


@dataclass
class CodePaths:
    """The kernels and implementations a run took, read from its op trace: where library
    versions (or the mode) change them, two runs of the same code can need different memory."""

    attention: list[str] = field(default_factory=list)  # SDPA kernels seen: cudnn, flash, ...
    optimizer: str = ""  # fused | foreach | for-loop ("" when no optimizer stepped)

    def differs(self, other: CodePaths | None) -> list[str]:
        """What differs from `other`, in words ("attention cudnn vs math"); [] when alike or
        when either side saw nothing to compare."""
        if other is None:
            return []
        out = []
        mine, theirs = "+".join(self.attention), "+".join(other.attention)
        if mine and theirs and mine != theirs:
            out.append(f"attention {mine} vs {theirs}")
        if self.optimizer and other.optimizer and self.optimizer != other.optimizer:
            out.append(f"optimizer {self.optimizer} vs {other.optimizer}")
        return out


@dataclass
class AllocatorStats:
    """The real CUDA caching allocator's view (cuda mode only)."""

    peak_allocated_bytes: int = 0
    peak_reserved_bytes: int = 0
    end_allocated_bytes: int = 0
    end_reserved_bytes: int = 0
    nvml_used_bytes: int | None = None  # what nvidia-smi shows for the whole GPU
    num_alloc_retries: int = 0
    num_ooms: int = 0
    untracked_peak_bytes: int = 0  # allocator peak - tracked-tensor peak: workspaces, rounding
    timeline: Timeline | None = None  # from the allocator's own trace (_record_memory_history)
    reserved_timeline: Timeline | None = None
    # sim: these numbers come from lab.measure.sim.allocator.model's model of the caching allocator,
    # not from a GPU (the timelines' x is the tracked-event index, as the tensor timeline's)
    predicted: bool = False

    @classmethod
    def from_counters(cls, c, predicted: bool = False) -> AllocatorStats:
        """From lab.measure.counters.AllocatorCounters (measured, or the model's)."""
        return cls(peak_allocated_bytes=c.peak_allocated, peak_reserved_bytes=c.peak_reserved,
                   end_allocated_bytes=c.allocated, end_reserved_bytes=c.reserved,
                   num_alloc_retries=c.num_alloc_retries, num_ooms=c.num_ooms,
                   predicted=predicted)


@dataclass
class RunResult:
    lesson: str
    variant: str
    mode: str
    scale: str
    device: DeviceInfo
    status: str = "ok"
    error: str | None = None
    peak: Peak = field(default_factory=Peak)
    phases: list[PhaseStats] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    step_time_s: float | None = None
    timing: Timing | None = None  # how step_time_s was measured (None: older results, sim)
    timeline: Timeline = field(default_factory=Timeline)
    blocks: list[Block] = field(default_factory=list)  # largest storages, for the inspector
    allocator: AllocatorStats | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    wall_s: float | None = None  # whole worker run, process start excluded
    profile_path: str | None = None  # profile.pkl for pytorch.org/memory_viz (cuda)
    torch_version: str = ""
    transformers_version: str = ""  # "" when transformers is not installed (or older results)
    # every library whose version changes what a run does: python, torch, transformers and the
    # optional extras a lesson uses (peft, torchao, pytorch-lightning, liger-kernel) if installed
    versions: dict[str, str] = field(default_factory=dict)
    code_paths: CodePaths | None = None  # None: not read (older results)
    # "" no torch.compile call; "eager": the script called torch.compile and ran eagerly (under
    # the tracker, or in sim); "compiled": measured as compiled (lab.profile.compiled)
    compile_mode: str = ""
    created: str = ""  # ISO time
    # torch.distributed runs (RunRequest.ranks > 1): every rank's own result, by rank; the
    # top-level numbers are rank 0's (status and error: the first rank that failed, named)
    ranks: list[RunResult] = field(default_factory=list)
    # what this instance is written as: always today's (read from schema 1 or 2, written as 2)
    schema: int = field(default=SCHEMA, init=False)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    # What the mode means, for display code (which never compares mode names: lab.measure.modes)
    @property
    def mode_info(self) -> ModeInfo | None:
        return MODE_INFO.get(self.mode)

    @property
    def simulated(self) -> bool:
        """Made in sim: fake tensors, exact bytes, the allocator's numbers predicted."""
        return bool(self.mode_info and self.mode_info.simulated)

    @property
    def on_gpu(self) -> bool:
        """Measured on a real CUDA GPU (its allocator's counters are measured, not predicted)."""
        return bool(self.mode_info and self.mode_info.on_gpu)

    @property
    def timed(self) -> bool:
        """Its mode measures step times (cuda, cpu); sim has none."""
        return bool(self.mode_info and self.mode_info.timed)

    def check(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def phase(self, name: str) -> PhaseStats | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        # `simulated` follows from the mode; written out for readers of the JSON contract
        return {"schema": d.pop("schema"), **d, "simulated": self.simulated}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        """A result from its JSON form, every field's type checked (a one-line SchemaError,
        a ValueError, names the field); schema 1 (older recordings) is read too."""
        from .schema import SchemaError, decode

        if not isinstance(d, dict):
            raise SchemaError(f"a result is a JSON object, not {type(d).__name__}")
        if d.get("schema") not in READS:
            raise SchemaError(f"result schema {d.get('schema')!r} is not supported (this lab "
                              f"reads {', '.join(map(str, READS))})")
        return decode(cls, d, "result")
