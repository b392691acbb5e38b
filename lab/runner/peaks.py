"""What a run will need: its expected GPU peak (from the lesson's H200 recording) and cores.

The expected peak of a lesson variant is its recording's allocator `peak_reserved_bytes`
(`assets/reference/<lesson-id>/<variant>.json`, recorded at seed scale, so an upper bound for
small scale too), capped by the run's virtual GPU when it has one, plus a margin for what the
allocator does not count: the CUDA context (~0.5 GiB), NCCL buffers, fragmentation. Unknown
(no recording, a playground run) = the whole GPU.
"""

from __future__ import annotations

import json
import tomllib
from functools import lru_cache
from pathlib import Path

from .admission import Need
from .protocol import RunRequest

MARGIN_BYTES = 1 << 30
MARGIN_FRACTION = 0.05


@lru_cache(maxsize=256)
def _lesson_toml(path: str, mtime: float) -> dict:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def lesson_toml(lesson_path: str) -> dict:
    path = Path(lesson_path) / "lesson.toml"
    try:
        return _lesson_toml(str(path), path.stat().st_mtime)
    except OSError:
        return {}


def lesson_id(lesson_path: str) -> str:
    """The id in lesson.toml, else the folder name without its number (05-mixed-precision)."""
    return str(lesson_toml(lesson_path).get("id") or Path(lesson_path).name.split("-", 1)[-1])


@lru_cache(maxsize=512)
def _recorded_peak(path: str, mtime: float) -> int | None:
    try:
        with open(path, encoding="utf-8") as f:
            alloc = json.load(f).get("allocator") or {}
    except (OSError, ValueError):
        return None
    peak = alloc.get("peak_reserved_bytes")
    return int(peak) if peak else None


def recorded_peak(req: RunRequest, root: Path | None = None) -> int | None:
    """The H200 recording's reserved peak for this variant, or None."""
    if req.experiment:
        return None  # the playground: any workload, any size
    if root is None:
        from lab.reference import REFERENCE_DIR

        root = REFERENCE_DIR
    path = Path(root) / lesson_id(req.lesson_path) / f"{req.variant}.json"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return _recorded_peak(str(path), mtime)


def need_for(req: RunRequest, root: Path | None = None) -> Need:
    if req.mode_info.on_gpu:
        if req.exclusive or (not req.experiment and lesson_toml(req.lesson_path).get("gpu") == "exclusive"):
            return Need(gpus=req.ranks, cores=0, gpu_bytes=None)
        peak = recorded_peak(req, root)
        if req.gpu_memory:  # the allocator is capped there (set_per_process_memory_fraction)
            peak = min(peak, req.gpu_memory) if peak else req.gpu_memory
        return Need(gpus=req.ranks, cores=0,
                    gpu_bytes=None if peak is None else int(peak * (1 + MARGIN_FRACTION)) + MARGIN_BYTES)
    if req.ranks > 1:
        return Need(cores=req.ranks)
    # a real CPU run that times its steps has the machine to itself
    real_cpu = not req.mode_info.on_gpu and not req.mode_info.simulated
    return Need(cores=None if real_cpu and req.timing else 1)
