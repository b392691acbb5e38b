"""What a run will need: its expected GPU peak and its cores (lab.runner.admission's `Need`).

A lesson variant's expected peak is its H200 recording's allocator `peak_reserved_bytes`
(`assets/reference/<lesson-id>/<variant>.json`, recorded at seed scale, so an upper bound for
small scale too), read through the result schema once, when the request is made
(`RunRequest.for_lesson` fills `expected_peak`); capped by the run's virtual GPU when it has one,
plus a margin for what the allocator does not count: the CUDA context (~0.5 GiB), NCCL buffers,
fragmentation. Unknown (no recording, a playground run) = the whole GPU.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .admission import Need
from .protocol import RunRequest

MARGIN_BYTES = 1 << 30
MARGIN_FRACTION = 0.05


def recorded_peak(lesson_id: str, variant: str, root: Path | str | None = None) -> int | None:
    """The H200 recording's reserved peak for this variant, or None."""
    from lab.course.reference import REFERENCE_DIR

    path = Path(root if root is not None else REFERENCE_DIR) / lesson_id / f"{variant}.json"
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return _recorded_peak(lesson_id, variant, str(path.parent.parent), mtime)


@lru_cache(maxsize=512)
def _recorded_peak(lesson_id: str, variant: str, root: str, mtime: float) -> int | None:
    """Cached by the file's mtime: a recording is ~1 MB of JSON, and a course run asks for each
    variant of a lesson."""
    from lab.course.reference import load_recording

    recorded = load_recording(lesson_id, variant, root)
    peak = recorded.allocator.peak_reserved_bytes if recorded and recorded.allocator else None
    return int(peak) if peak else None


def need_for(req: RunRequest) -> Need:
    if req.mode_info.on_gpu:
        if req.exclusive:
            return Need(gpus=req.ranks, cores=0, gpu_bytes=None)
        peak = req.expected_peak
        if req.gpu_memory:  # the allocator is capped there (set_per_process_memory_fraction)
            peak = min(peak, req.gpu_memory) if peak else req.gpu_memory
        return Need(gpus=req.ranks, cores=0,
                    gpu_bytes=None if peak is None else int(peak * (1 + MARGIN_FRACTION)) + MARGIN_BYTES)
    if req.ranks > 1:
        return Need(cores=req.ranks)
    # a real CPU run that times its steps has the machine to itself
    real_cpu = not req.mode_info.on_gpu and not req.mode_info.simulated
    return Need(cores=None if real_cpu and req.timing else 1)
