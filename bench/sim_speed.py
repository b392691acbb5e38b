"""Seconds per lesson variant in sim at seed scale, in this process (no worker start-up).

    python bench/sim_speed.py [--lesson 08] [--repeat 3] [--profile 08:bf16]

Prints, per variant, the best of `--repeat` runs of `measure_variant(..., mode="sim")`: wall and
CPU seconds (CPU time is steadier on a shared machine), and the one-off costs a worker pays before
its first variant (importing torch, lab.measure and transformers). `--profile L:V` prints the
top of a cProfile of one variant instead.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(label: str, fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    print(f"{label:40} wall {time.perf_counter() - w:6.2f} s   cpu {time.process_time() - c:6.2f} s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lesson", action="append")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--profile")
    args = ap.parse_args()

    timed("import torch", lambda: __import__("torch"))
    timed("import lab.measure.measure", lambda: __import__("lab.measure.measure"))
    timed("import transformers (GPT-2, Qwen2)", lambda: (
        __import__("transformers.models.gpt2.modeling_gpt2"),
        __import__("transformers.models.qwen2.modeling_qwen2")))
    from lab.curriculum import load_course
    from lab.measure.measure import measure_variant
    from lab.runner.worker import load_experiment

    def run(lesson, variant):
        fn = getattr(load_experiment(str(lesson.experiment_path)), variant)
        return measure_variant(fn, lesson=lesson.id, variant=variant, mode="sim", scale="seed",
                               params=lesson.params("seed"), checks=list(lesson.checks),
                               timing=False)

    course = load_course()
    if args.profile:
        import cProfile
        import pstats

        key, variant = args.profile.split(":")
        lesson = course.find(key)
        run(lesson, variant)
        cProfile.runctx("run(lesson, variant)", globals(), locals(), "/tmp/sim_speed.prof")
        pstats.Stats("/tmp/sim_speed.prof").sort_stats("tottime").print_stats(25)
        return
    total_w = total_c = 0.0
    print(f"\n{'variant':34} {'wall s':>7} {'cpu s':>7}  status")
    for lesson in course.lessons:
        if args.lesson and not any(lesson.key == f or lesson.id == f for f in args.lesson):
            continue
        for v in lesson.variants:
            best = None
            for _ in range(max(1, args.repeat)):
                w, c = time.perf_counter(), time.process_time()
                r = run(lesson, v.name)
                w, c = time.perf_counter() - w, time.process_time() - c
                best = (w, c) if best is None or c < best[1] else best
            total_w += best[0]
            total_c += best[1]
            print(f"{lesson.key + ' ' + v.name:34} {best[0]:7.2f} {best[1]:7.2f}  {r.status}")
    print(f"{'all variants':34} {total_w:7.2f} {total_c:7.2f}")


if __name__ == "__main__":
    main()
