"""The whole course through the runner service, timed: where every variant's seconds go.

    PYTHONPATH=. python bench/course_cuda.py [--mode cuda] [--scale seed] [--lessons 01 05]
                                             [--jobs N] [--direct] [--no-timing] [--out FILE]

Every variant of every lesson (or those given) is submitted at once (`--jobs`: at most N in
flight) to a runner service started for this run (a temporary MEMLAB_HOME: it never meets
another service); the service's queue packs them on the GPU(s) by their recorded peaks.
`--direct` runs today's way instead (a fresh worker per variant, `--jobs` at a time, one GPU
each). Prints the total (bar, issue 11: under 180 s on one H200 in cuda at seed scale) and per
variant: queued / worker start / tracked pass / untracked timing pass / tail, plus how many
ran at once, and the measured peak and step time against the H200 recording. Numbers only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import Timed  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="cuda")
    p.add_argument("--scale", default="seed")
    p.add_argument("--lessons", nargs="*", help="lesson numbers or ids (default: all)")
    p.add_argument("--jobs", type=int, default=None)
    p.add_argument("--direct", action="store_true", help="no service: a fresh worker per variant")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--out", help="write the numbers as JSON here")
    args = p.parse_args(argv)
    os.environ["MEMLAB_HOME"] = tempfile.mkdtemp(prefix="memlab-course-")
    os.environ.pop("MEMLAB_RUNNER", None)

    from lab.course.curriculum import load_course
    from lab.course.reference import load_reference
    from lab.runner import remote
    from lab.runner.client import SubprocessRunner
    from lab.runner.loop import run_all
    from lab.runner.protocol import RunRequest
    from lab.runner.remote import ServiceRunner

    course = load_course()
    lessons = [course.find(x) for x in args.lessons] if args.lessons else list(course.lessons)
    tasks = [(lesson, RunRequest.for_lesson(lesson, v.name, args.mode, args.scale,
                                            timing=not args.no_timing))
             for lesson in lessons if args.mode in lesson.modes for v in lesson.variants]
    gpus = 0
    if args.direct and args.mode == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    runner = (SubprocessRunner(gpus=gpus) if args.direct
              else ServiceRunner(fallback=SubprocessRunner()))
    timed = [Timed(runner) for _ in tasks]
    lock, live, peak_live = threading.Lock(), set(), [0]

    class Each:
        parallel = getattr(runner, "parallel", 1)

        def run(self, req, on_event=None, cancel=None):
            i = next(k for k, (_, r) in enumerate(tasks) if r is req)

            def ev(msg):
                with lock:  # how many workers measure at the same moment
                    if msg.get("type") == "started":
                        live.add(i)
                        peak_live[0] = max(peak_live[0], len(live))
                    elif msg.get("type") == "result":
                        live.discard(i)
                if on_event:
                    on_event(msg)

            res = timed[i].run(req, cancel=cancel, on_event=ev).result
            with lock:
                live.discard(i)
            print(f"  {tasks[i][0].key} {req.variant:24s} {res.status:9s} {timed[i].wall_s:6.1f} s",
                  file=sys.stderr, flush=True)
            return res

    state = {}
    t0 = time.perf_counter()
    try:
        results = run_all(Each(), [r for _, r in tasks], jobs=args.jobs)
        total = time.perf_counter() - t0
        if not args.direct:
            state = remote.ask("state")
    finally:
        if not args.direct:
            remote.stop_service()

    rows, sums = [], {}
    for (lesson, req), res, t in zip(tasks, results, timed):
        ref = load_reference(lesson.id).get(req.variant)
        a, ra = res.allocator, ref.allocator if ref else None
        row = {"lesson": lesson.key, "variant": req.variant, "status": res.status, "error": res.error,
               "wall_s": t.wall_s, "worker_wall_s": res.wall_s, "overhead_s": t.overhead_s,
               **{f"{k}_s": v for k, v in t.stages().items()},
               "peak_bytes": res.peak.bytes, "ref_peak_bytes": ref.peak.bytes if ref else None,
               "peak_reserved_bytes": a.peak_reserved_bytes if a else None,
               "ref_peak_reserved_bytes": ra.peak_reserved_bytes if ra else None,
               "step_time_s": res.step_time_s, "ref_step_time_s": ref.step_time_s if ref else None}
        rows.append(row)
        for k in ("queued_s", "start_s", "tracked_s", "timing_s", "tail_s", "overhead_s"):
            sums[k] = sums.get(k, 0.0) + (row[k] or 0.0)
    out = {"mode": args.mode, "scale": args.scale, "direct": args.direct, "jobs": args.jobs,
           "variants": len(rows), "total_s": total, "max_at_once": peak_live[0], "sums_s": sums,
           "service_state": state, "rows": rows,
           "failed": [f"{r['lesson']} {r['variant']}: {r['status']} {r['error']}" for r in rows
                      if r["status"] not in ("ok", "oom")]}
    if getattr(runner, "fallbacks", 0):
        out["fallbacks"] = runner.fallbacks
        print(f"\nWARNING: {runner.fallbacks} runs did not reach the runner service "
              f"({runner.fallback_reason}); they ran directly, one at a time")
    print(f"\n{len(rows)} variants, {args.mode} {args.scale}, "
          f"{'direct' if args.direct else 'service'}: total {total:.1f} s, "
          f"at most {peak_live[0]} measuring at once")
    print("summed over variants (s): " + ", ".join(f"{k[:-2]} {v:.1f}" for k, v in sums.items()))
    print(f"{'lesson':6s} {'variant':24s} {'status':7s} {'wall':>6s} {'queued':>6s} {'start':>6s} "
          f"{'tracked':>7s} {'timing':>6s} {'step s':>7s} {'ref':>7s} {'resv GB':>8s} {'ref':>7s}")
    for r in rows:
        f = lambda v, d=2: "—" if v is None else f"{v:.{d}f}"  # noqa: E731
        gb = lambda v: "—" if v is None else f"{v / 1e9:.2f}"  # noqa: E731
        print(f"{r['lesson']:6s} {r['variant']:24s} {r['status']:7s} {r['wall_s']:6.1f} "
              f"{r['queued_s']:6.1f} {r['start_s']:6.1f} {r['tracked_s']:7.1f} {r['timing_s']:6.1f} "
              f"{f(r['step_time_s'], 3):>7s} {f(r['ref_step_time_s'], 3):>7s} "
              f"{gb(r['peak_reserved_bytes']):>8s} {gb(r['ref_peak_reserved_bytes']):>7s}")
    if out["failed"]:
        print("failed: " + "; ".join(out["failed"]))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
