"""What a lesson screen is given (screens get their objects passed in, never reach into the app).

`LessonDeps` is built once by the app and handed to every `LessonScreen`: the progress store,
the runner, the recordings, how to choose a mode, what this machine has, the class a served
workshop follows, and `KeptRuns`: what this app process keeps across lesson screens (the results
on screen per lesson, this session's run records) — not on disk, unlike `Progress`. (Not
lab.measure.session.Session, the `run` an experiment receives.)

Headless: no Textual (tests build one by hand).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lab.measure.modes import ModeChoice
from lab.measure.result import RunResult
from lab.course.progress import Progress, RunRecord

from .result_set import ResultSet


@dataclass
class KeptRuns:
    sets: dict[str, tuple[ResultSet, ResultSet]] = field(default_factory=dict)  # lead, beside
    records: dict[str, list[RunRecord]] = field(default_factory=dict)  # this session's runs

    def clear(self) -> None:
        self.sets.clear()
        self.records.clear()


@dataclass
class Machine:
    """What this machine gives: a CUDA GPU or not (None while it is being detected)."""

    has_gpu: bool | None = None
    gpu: Any = None  # GpuInfo (name, total_bytes) when there is one

    @property
    def detecting(self) -> bool:
        return self.has_gpu is None


@dataclass
class LessonDeps:
    progress: Progress
    runner: Any  # the Runner protocol: run(request, on_event, cancel) -> RunResult
    recordings: Callable[[str], dict[str, RunResult]]  # lesson id -> variant -> H200 recording
    reference_root: Path
    choose_mode: Callable[[str, str | None, tuple[str, ...]], ModeChoice]  # may raise ModeError
    machine: Callable[[], Machine]
    kept: KeptRuns = field(default_factory=KeptRuns)
    playback_seconds: float = 0.6  # per variant, for the H200 recordings
    classroom: Callable[[], Any] = lambda: None  # the followed class (served workshops) or None
    on_progress: Callable[[], None] = lambda: None  # the course map re-reads progress


__all__ = ["KeptRuns", "LessonDeps", "Machine"]
