"""H200 allocator traces for the PYTORCH_CUDA_ALLOC_CONF settings the model follows (issue 26).

    python bench/allocator_settings_traces.py --out DIR            on a CUDA GPU
    python bench/allocator_settings_traces.py --out DIR --check    here: replay DIR's traces
    python bench/allocator_settings_traces.py --out DIR --cpu      here: a dry run (small, no trace)

Every variant of lesson 23 (allocator-tuning) runs in a process of its own with its
PYTORCH_CUDA_ALLOC_CONF set before torch starts, the allocator's history on (no stacks), and
writes what bench/probe_cuda.py's traces hold (the allocator's own trace, memory_stats, the
final segments) plus the settings. Writes:
  DIR/settings_traces.jsonl.gz                       every run, whole
  tests/fixtures/h200_allocator_settings_traces.json.gz   (--fixture) the runs cut to what
                                                     tests/unit/test_allocator_settings_traces.py replays
`--check` replays them through lab.measure.sim.allocator.model (real and synthetic segment
addresses) and prints the model minus the GPU: peak allocated / reserved, out-of-memory, retries,
segments freed. Under a minute on an H200.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

LESSON = "23"
FIXTURE = ROOT / "tests/fixtures/h200_allocator_settings_traces.json.gz"
KEEP = ("alloc", "free_completed", "segment_alloc", "segment_map", "oom")


def job(variant: str, cpu: bool = False) -> dict:
    """In a fresh process whose environment holds the variant's PYTORCH_CUDA_ALLOC_CONF."""
    from probe_cuda import job_trace

    out = job_trace(cpu, LESSON, variant, {})
    out["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return out


def fixture_run(r: dict) -> dict:
    acts = r["alloc_actions"]
    ms = r["memory_stats"]
    return {"lesson": r["lesson"], "variant": r["variant"], "alloc_conf": r["alloc_conf"],
            "cap": r.get("cap"),
            "real": {"allocated": ms["allocated_bytes.all.peak"], "reserved": ms["reserved_bytes.all.peak"],
                     "oom": r["status"] == "oom", "retries": ms["num_alloc_retries"],
                     "segments_freed": ms.get("num_device_free", 0)},
            "events": [[acts[a], addr, size] for a, addr, size, _s in r["alloc_trace"] if acts[a] in KEEP]}


def check(runs: list[dict]) -> None:
    from lab.measure.sim.allocator.replay import replay_cuda_trace
    from lab.measure.sim.allocator.settings import parse_alloc_conf

    print(f"{'variant':22} {'alloc':>10} {'resv':>10} oom retries freed | synthetic resv")
    for r in runs:
        s = parse_alloc_conf(r["alloc_conf"])
        evs = [tuple(e) for e in r["events"]]
        exact = replay_cuda_trace(evs, cap=r["cap"], settings=s)
        synth = replay_cuda_trace(evs, cap=r["cap"], settings=s, real_addresses=False)
        real = r["real"]
        print(f"{r['variant']:22} {exact['allocated'] - real['allocated']:>+10,} "
              f"{exact['reserved'] - real['reserved']:>+10,} "
              f"{'=' if exact['oom'] == real['oom'] else 'X'}   {exact['retries']}/{real['retries']}"
              f"     {exact['segments_freed']}/{real['segments_freed']} | "
              f"{(synth['reserved'] - real['reserved']) / max(real['reserved'], 1) * 100:+.3f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="replay DIR's traces through the model")
    ap.add_argument("--fixture", action="store_true", help=f"also write {FIXTURE.relative_to(ROOT)}")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU (no allocator trace)")
    ap.add_argument("--job", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out)
    if args.job:
        (out / f"{args.job}.json").write_text(json.dumps(job(args.job, args.cpu), separators=(",", ":")))
        return
    whole = out / "settings_traces.jsonl.gz"
    if args.check:
        check([fixture_run(json.loads(line)) for line in gzip.open(whole, "rt")])
        return
    from lab.course.curriculum import load_course

    lesson = load_course().find(LESSON)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for v in lesson.variants:
        env = {**os.environ, **dict(v.env), "PYTHONPATH": str(ROOT)}
        env.pop("PYTORCH_ALLOC_CONF", None)  # the variant's PYTORCH_CUDA_ALLOC_CONF decides
        if not dict(v.env):
            env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        p = subprocess.run([sys.executable, __file__, "--out", str(out), "--job", v.name]
                           + (["--cpu"] if args.cpu else []),
                           env=env, capture_output=True, text=True, cwd=ROOT, timeout=240)
        f = out / f"{v.name}.json"
        if p.returncode or not f.is_file():
            print(f"{v.name}: failed (rc {p.returncode}): {p.stderr[-800:]}")
            continue
        r = json.loads(f.read_text())
        r["cap"] = lesson.params("seed").get("gpu_memory")
        f.unlink()
        runs.append(r)
        print(f"{v.name}: {r['status']}, {len(r.get('alloc_trace', []))} allocator events")
    if args.cpu:
        print(f"dry run: {len(runs)} of {len(lesson.variants)} variants ran (no allocator on the CPU)")
        return
    with gzip.open(whole, "wt") as fh:
        for r in runs:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
    if args.fixture:
        with gzip.open(FIXTURE, "wt") as fh:
            json.dump([fixture_run(r) for r in runs], fh, separators=(",", ":"))
        print(f"wrote {len(runs)} runs to {FIXTURE}")
    check([fixture_run(r) for r in runs])


if __name__ == "__main__":
    main()
