"""Runner overhead: lesson 08 in sim at seed scale, request to results, against a bare import.

    PYTHONPATH=. python bench/runner_overhead.py [--lesson 08] [--mode sim] [--scale seed]
                                                 [--repeat 3] [--json FILE]

Prints (seconds, never asserted):
  bare import      `python -c "import torch, transformers"` on this machine (median)
  per scenario     request-to-results for every variant of the lesson, its ratio to the bare
                   import, and the per-variant overhead (wall minus the worker's own wall_s):
    direct          today's path before the service: a fresh worker per variant, one at a time
    service cold    no service running: it starts on demand (imports in the first worker)
    service warm    the service is up with warm workers; one variant at a time (the app's way)
    service warm ‖  the same, every variant submitted at once (the queue admits by cores)
Bars (issue 11): request to results <= 2x the bare import; overhead < 0.5 s per variant.
Uses a temporary MEMLAB_HOME, so it never meets your own runner service; stops what it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import Timed  # noqa: E402


def bare_import(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, transformers"], check=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def scenario(name, runner, reqs, jobs):
    from lab.runner.loop import run_all

    timed = [Timed(runner) for _ in reqs]

    class Each:  # the loop calls runner.run; route each request through its own Timed
        parallel = getattr(runner, "parallel", 1)

        def run(self, req, on_event=None, cancel=None):
            i = reqs.index(req)
            return timed[i].run(req, cancel=cancel, on_event=on_event).result

    t = time.perf_counter()
    results = run_all(Each(), reqs, jobs=jobs)
    total = time.perf_counter() - t
    bad = [f"{r.variant}: {r.status} {r.error}" for r in results if r.status != "ok"]
    return {"scenario": name, "total_s": total, "statuses": [r.status for r in results],
            "problems": bad,
            "variants": [{"variant": r.variant, "wall_s": x.wall_s, "worker_wall_s": r.wall_s,
                          "overhead_s": x.overhead_s, **{f"{k}_s": v for k, v in x.stages().items()}}
                         for r, x in zip(results, timed)]}


def wait_ready(timeout: float = 300.0) -> None:
    from lab.runner import remote

    n = remote.ask("state")["pool"]["per_key"]
    deadline = time.monotonic() + timeout  # the spares of sim/cpu runs ("cpu" key)
    while remote.ask("state")["pool"]["keys"].get("cpu", {}).get("ready", 0) < n and \
            time.monotonic() < deadline:
        time.sleep(0.2)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--lesson", default="08")
    p.add_argument("--mode", default="sim")
    p.add_argument("--scale", default="seed")
    p.add_argument("--repeat", type=int, default=3, help="bare imports timed (median)")
    p.add_argument("--json", help="also write the numbers here")
    p.add_argument("--only", nargs="*", help="scenarios to run (direct, cold, warm, parallel)")
    args = p.parse_args(argv)
    os.environ["MEMLAB_HOME"] = tempfile.mkdtemp(prefix="memlab-bench-")
    os.environ.pop("MEMLAB_RUNNER", None)

    from lab.course.curriculum import load_course
    from lab.runner import remote
    from lab.runner.client import SubprocessRunner
    from lab.runner.protocol import RunRequest
    from lab.runner.remote import ServiceRunner

    lesson = load_course().find(args.lesson)
    reqs = [RunRequest.for_lesson(lesson, v.name, args.mode, args.scale) for v in lesson.variants]
    want = set(args.only or ["direct", "cold", "warm", "parallel"])
    out = {"machine": {"cores": os.cpu_count(), "load": os.getloadavg()}, "lesson": lesson.id,
           "mode": args.mode, "scale": args.scale, "bare_import_s": bare_import(args.repeat),
           "scenarios": []}
    service = ServiceRunner(fallback=SubprocessRunner())
    try:
        if "direct" in want:
            out["scenarios"].append(scenario("direct (before)", SubprocessRunner(), reqs, 1))
        if "cold" in want:
            remote.stop_service()
            out["scenarios"].append(scenario("service cold", service, reqs, 1))
        if "warm" in want:
            remote.connect().close()
            wait_ready()
            out["scenarios"].append(scenario("service warm", service, reqs, 1))
        if "parallel" in want:
            remote.connect().close()
            wait_ready()
            out["scenarios"].append(scenario("service warm ‖", service, reqs, None))
    finally:
        remote.stop_service()
    out["machine"]["load_after"] = os.getloadavg()
    if service.fallbacks:
        print(f"WARNING: {service.fallbacks} runs did not reach the service: {service.fallback_reason}")
    bare = out["bare_import_s"]
    print(f"bare `import torch, transformers`: {bare:.2f} s   (load avg {out['machine']['load'][0]:.1f}, "
          f"{out['machine']['cores']} cores)")
    print(f"{'scenario':18s} {'total s':>8s} {'× import':>9s} {'overhead s/variant (max)':>26s}")
    for s in out["scenarios"]:
        ov = [v["overhead_s"] for v in s["variants"]]
        print(f"{s['scenario']:18s} {s['total_s']:8.2f} {s['total_s'] / bare:9.2f} "
              f"{statistics.mean(ov):14.2f} ({max(ov):.2f})" + (f"  {s['problems']}" if s["problems"] else ""))
        for v in s["variants"]:
            print(f"    {v['variant']:10s} wall {v['wall_s']:6.2f}  worker {v['worker_wall_s'] or 0:6.2f}  "
                  + "  ".join(f"{k[:-2]} {v[k]:.2f}" for k in ("queued_s", "start_s", "tracked_s", "timing_s", "tail_s")))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
