"""Print every lesson's cpu-mode small-scale run: status, peak, step time, wall time per variant.

    PYTHONPATH=. python bench/lessons_cpu.py [LESSON ...]

Runs in-process through `measure_request` (tracked pass + untracked timed pass), like the
worker without the subprocess. Numbers, not asserts: CPU timings vary from run to run and with
whatever else the machine is doing.
"""

from __future__ import annotations

import sys
import time

from lab.course.curriculum import load_course
from lab.runner.protocol import RunRequest
from lab.runner.worker import load_experiment, measure_request


def main(argv: list[str]) -> int:
    course = load_course()
    lessons = [course.find(a) for a in argv] if argv else course.lessons
    total = time.perf_counter()
    print(f"{'lesson':26s} {'variant':28s} {'status':6s} {'peak MB':>10s} {'step s':>9s} {'wall s':>7s}")
    for lesson in lessons:
        module = load_experiment(str(lesson.experiment_path))
        for v in lesson.variants:
            t = time.perf_counter()
            res = measure_request(RunRequest.for_lesson(lesson, v.name, "cpu", "small"),
                                  getattr(module, v.name))
            step = f"{res.step_time_s:.4f}" if res.step_time_s is not None else "—"
            print(f"{lesson.key + ' ' + lesson.id:26s} {v.name:28s} {res.status:6s} "
                  f"{res.peak.bytes / 1e6:10.2f} {step:>9s} {time.perf_counter() - t:7.1f}",
                  flush=True)
    print(f"total {time.perf_counter() - total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
