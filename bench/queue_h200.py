"""A workshop's queue on one GPU: N runs of one lesson submitted at once to the runner service.

    PYTHONPATH=. python bench/queue_h200.py [--lesson 03] [--variant baseline] [--runs 8]
                                            [--gpu 0] [--mode cuda] [--json FILE]

First one run alone (its step time is the reference), then `--runs` runs of the same variant
submitted at the same instant, as forty learners pressing r would, through the machine's runner
service restricted to one GPU (CUDA_VISIBLE_DEVICES=--gpu). Prints per run (seconds, from the
moment all were submitted; never asserted): the queue wait ("waiting for GPU 0 — N ahead" as
first seen), when it started and ended, its status and peak, its step time against the run
alone, how long it waited for the GPU to itself before timing its steps (lab.runner.gpu_turns),
and which runs it overlapped. Then the bars of issue 15: every run ok (no OOM), runs
that fit together ran together, each step time within 5 % of the run alone.

Uses a temporary MEMLAB_HOME (its own runner service), and stops the service it started.
`--mode sim` checks the script on a machine without a GPU (sim runs are admitted by cores).
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


def run_batch(runner, reqs) -> tuple[list[dict], float]:
    """Submit every request at once (one thread each); the events' times, per run."""
    t0 = time.perf_counter()
    rows: list[dict] = [{} for _ in reqs]

    def one(i: int) -> None:
        first_wait: list[str] = []
        turn: dict[str, float] = {}  # waiting for the GPU to itself (gpu_turns), then timing

        def ev(msg: dict) -> None:
            if msg.get("type") != "status":
                return
            if msg.get("stage") == "waiting" and not first_wait:
                first_wait.append(msg.get("text", ""))
            if msg.get("stage") == "waiting" and msg.get("turn"):  # lab.runner.gpu_turns
                turn.setdefault("asked", time.perf_counter())
            if msg.get("stage") == "timing":
                turn.setdefault("timing", time.perf_counter())

        submitted = time.perf_counter() - t0
        timed = Timed(runner).run(reqs[i], on_event=ev)
        m, r = timed.marks, timed.result
        start = submitted + m.get("starting", m.get("started", 0.0))
        rows[i] = {"run": i + 1, "submitted_s": submitted, "queue_wait_s": start - submitted,
                   "first_wait": first_wait[0] if first_wait else "",
                   "start_s": start, "end_s": submitted + timed.wall_s, "status": r.status,
                   "error": r.error, "peak_bytes": r.peak.bytes,
                   "reserved_peak_bytes": r.allocator.peak_reserved_bytes if r.allocator else None,
                   "step_time_s": r.step_time_s,
                   "turn_wait_s": (turn["timing"] - turn["asked"]) if len(turn) == 2 else 0.0}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for row in rows:
        row["overlaps"] = [o["run"] for o in rows if o is not row
                           and o["start_s"] < row["end_s"] and row["start_s"] < o["end_s"]]
    return rows, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lesson", default="03")
    p.add_argument("--variant", default="baseline")
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--gpu", default="0", help="the one GPU the service may use")
    p.add_argument("--mode", default="cuda", choices=["cuda", "sim", "cpu"])
    p.add_argument("--scale", default="seed")
    p.add_argument("--json", help="also write the numbers here")
    args = p.parse_args(argv)
    os.environ["MEMLAB_HOME"] = tempfile.mkdtemp(prefix="memlab-queue-")
    os.environ.pop("MEMLAB_RUNNER", None)
    if args.mode == "cuda":
        os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu

    from lab.course.curriculum import load_course
    from lab.runner import remote
    from lab.runner.client import SubprocessRunner
    from lab.runner.peaks import need_for
    from lab.runner.protocol import RunRequest
    from lab.runner.remote import ServiceRunner

    lesson = load_course().find(args.lesson)
    req = RunRequest.for_lesson(lesson, args.variant, args.mode, args.scale)
    runner = ServiceRunner(fallback=SubprocessRunner())
    out = {"lesson": lesson.id, "variant": args.variant, "mode": args.mode, "scale": args.scale,
           "gpu": args.gpu, "need": repr(need_for(req)), "runs": args.runs}
    t_all = time.perf_counter()
    try:
        alone = Timed(runner).run(req).result
        out["alone"] = {"status": alone.status, "step_time_s": alone.step_time_s,
                        "peak_bytes": alone.peak.bytes, "error": alone.error}
        try:
            out["service_state"] = remote.ask("state")  # the GPUs and pool the service sees
        except Exception as e:  # noqa: BLE001 (a number to print, not a reason to stop)
            out["service_state"] = f"unavailable: {e}"
        rows, batch_s = run_batch(runner, [req] * args.runs)
    finally:
        remote.stop_service()
    out["batch_s"], out["total_s"], out["rows"] = batch_s, time.perf_counter() - t_all, rows
    if runner.fallbacks:
        out["fallbacks"] = f"{runner.fallbacks} runs missed the service: {runner.fallback_reason}"

    ref = alone.step_time_s
    print(f"{lesson.key} {lesson.id} / {args.variant}, {args.mode} {args.scale}, GPU {args.gpu}; "
          f"admission need {out['need']}")
    print(f"alone: {alone.status}, step {ref if ref is None else f'{ref:.3f} s'}, "
          f"peak {alone.peak.bytes / 1e9:.2f} GB")
    print(f"{'run':>3} {'wait s':>7} {'start s':>8} {'end s':>7} {'status':>8} {'step s':>7} "
          f"{'vs alone':>9} {'turn s':>6}  overlaps  first queue message")
    for r in rows:
        step = r["step_time_s"]
        vs = f"{(step - ref) / ref * 100:+.1f}%" if step and ref else "—"
        print(f"{r['run']:>3} {r['queue_wait_s']:7.1f} {r['start_s']:8.1f} {r['end_s']:7.1f} "
              f"{r['status']:>8} {'—' if step is None else f'{step:.3f}':>7} {vs:>9} "
              f"{r['turn_wait_s']:6.1f}  "
              f"{','.join(map(str, r['overlaps'])) or '-':8s}  {r['first_wait']}")
    edges = sorted([(r["start_s"], 1) for r in rows] + [(r["end_s"], -1) for r in rows])
    concurrent = running = 0
    for _, step in edges:  # ends sort before starts at the same instant
        running += step
        concurrent = max(concurrent, running)
    steps = [r["step_time_s"] for r in rows if r["step_time_s"]]
    worst = max((abs(s - ref) / ref for s in steps), default=None) if ref else None
    print(f"batch of {args.runs}: {batch_s:.1f} s; all ok: "
          f"{all(r['status'] == 'ok' for r in rows)}; OOM: "
          f"{sum(r['status'] == 'oom' for r in rows)}; most at once: {concurrent}; worst step "
          f"vs alone: {'—' if worst is None else f'{worst * 100:.1f}%'} (bar 5%)")
    if out.get("fallbacks"):
        print(f"WARNING: {out['fallbacks']}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
