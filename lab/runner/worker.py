"""`python -m lab.runner.worker REQUEST_JSON`: measure one variant and stream JSON lines.

One process per variant: a fresh CUDA context and a clean caching allocator for every
measurement, and a crash, hang or OOM stays in this process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading


def _open_protocol_stream():
    """Keep the real stdout for protocol lines; send fd 1 (prints, C++ logs) to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    lock = threading.Lock()

    def emit(msg: dict) -> None:
        line = json.dumps(msg, separators=(",", ":"))
        with lock:
            proto.write(line + "\n")
            proto.flush()

    return emit


def load_experiment(path: str):
    spec = importlib.util.spec_from_file_location("memlab_experiment", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    emit = _open_protocol_stream()
    from lab.curriculum import LessonError, load_lesson
    from lab.runner.protocol import RunRequest

    try:
        req = RunRequest.from_json_dict(json.loads(argv[0]))
        from pathlib import Path

        if req.experiment:  # not a lesson (the playground): the file and parameters are given
            lesson_id, experiment_path = Path(req.lesson_path).name, Path(req.experiment)
            params, checks = dict(req.overrides), []
            if not experiment_path.is_file():
                raise ValueError(f"no experiment file {req.experiment}")
        else:
            lesson = load_lesson(Path(req.lesson_path))
            # a variant's environment (e.g. PYTORCH_CUDA_ALLOC_CONF) is set before anything in
            # this process imports torch, which reads some of it once (lesson 10)
            os.environ.update(dict(lesson.variant(req.variant).env))
            lesson_id, experiment_path = lesson.id, lesson.experiment_path
            params, checks = {**lesson.params(req.scale), **req.overrides}, list(lesson.checks)
    except (LessonError, KeyError, IndexError, ValueError, TypeError) as e:
        emit({"type": "error", "error": f"bad request: {e}"})
        return 2

    emit({"type": "started", "pid": os.getpid(), "lesson": lesson_id, "variant": req.variant,
          "mode": req.mode, "scale": req.scale})
    try:
        module = load_experiment(str(experiment_path))
        fn = getattr(module, req.variant)
    except Exception as e:  # the lesson's code failed to import: report, don't crash
        emit({"type": "error", "error": f"{experiment_path.name}: {type(e).__name__}: {e}"})
        return 3

    from lab.measure.measure import measure_variant

    from lab.measure.measure import HISTORY_INCOMPATIBLE

    kwargs = dict(lesson=lesson_id, variant=req.variant, mode=req.mode, scale=req.scale,
                  params=params, checks=checks, gpu_memory=req.gpu_memory,
                  profile_path=req.profile_path, timing=req.timing, emit=emit)
    result = measure_variant(fn, **kwargs)
    if req.mode == "cuda" and result.status == "error" and HISTORY_INCOMPATIBLE in (result.error or ""):
        # this code's backward breaks under the allocator's history recorder: measure it again
        # without the recorder (tracker, memory_stats and NVML still on)
        failed = result.error
        result = measure_variant(fn, record_history=False, **kwargs)
        result.notes.append("Measured without torch.cuda.memory._record_memory_history (no "
                            f"allocator timeline, no profile.pkl): with it, backward failed: {failed}")
    emit({"type": "result", "result": result.to_dict()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
