"""The allocator model against real H200 allocator traces (bench/probe_cuda.py's traces.jsonl.gz).

    python bench/sim_allocator_traces.py [TRACES.jsonl.gz] [--fixture OUT.json.gz]

Every request and free the CUDA caching allocator saw (`_record_memory_history`) is replayed
through lab.measure.sim.allocator.model; printed per run: the model's max_memory_allocated /
max_memory_reserved / out-of-memory / retries minus the H200's, twice: with the segment addresses
the GPU handed out (best fit breaks ties by address: the model then must match to the byte) and
with the model's own synthetic addresses (what sim can do). `--fixture` writes a few runs, cut to
what the unit test needs, for tests/fixtures/.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.measure.sim.allocator.replay import replay_cuda_trace  # noqa: E402

DEFAULT = Path("/work/coord/gpu-results/sim-1/traces.jsonl.gz")
CAP_16GIB = 16 * 2**30  # lesson 18's virtual GPU (set_per_process_memory_fraction)
FIXTURE_RUNS = {("mixed-precision", "bf16", "{}"), ("out-of-memory", "baseline", '{"batch": 9}'),
                ("out-of-memory", "bf16_checkpointing", '{"batch": 20}'),
                ("caching-allocator", "expandable_segments", "{}")}


def events(run: dict) -> list[tuple[str, int, int]]:
    """(action, addr, size) of the allocator's trace, actions by name."""
    acts = run["alloc_actions"]
    return [(acts[a], addr, size) for a, addr, size, _stream in run["alloc_trace"]]



def real_stats(run: dict) -> dict:
    ms = run["memory_stats"]
    return {"allocated": ms["allocated_bytes.all.peak"], "reserved": ms["reserved_bytes.all.peak"],
            "oom": run["status"] == "oom", "retries": ms["num_alloc_retries"]}


def cap_of(run: dict) -> int | None:
    return CAP_16GIB if run["lesson"] == "out-of-memory" else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="?", default=str(DEFAULT))
    ap.add_argument("--fixture", help="write the runs the unit test replays here (.json.gz)")
    args = ap.parse_args()
    runs = [json.loads(line) for line in gzip.open(args.traces, "rt")]
    print(f"{'run':48} {'real: alloc':>12} {'resv':>6} oom retries | {'synthetic: alloc':>16} {'resv':>12}")
    for run in runs:
        real, evs = real_stats(run), events(run)
        exact = replay_cuda_trace(evs, cap=cap_of(run))
        synth = replay_cuda_trace(evs, cap=cap_of(run), real_addresses=False)
        name = f"{run['lesson']} {run['variant']} {json.dumps(run['overrides']) if run['overrides'] else ''}"
        print(f"{name:48} {exact['allocated'] - real['allocated']:>+12,} "
              f"{exact['reserved'] - real['reserved']:>+6,} "
              f"{'=' if exact['oom'] == real['oom'] else 'X'}   {exact['retries']}/{real['retries']}     | "
              f"{(synth['allocated'] - real['allocated']) / real['allocated'] * 100:>+15.3f}% "
              f"{(synth['reserved'] - real['reserved']) / real['reserved'] * 100:>+11.3f}%")
    if args.fixture:
        keep = [{"lesson": r["lesson"], "variant": r["variant"], "overrides": r["overrides"],
                 "real": real_stats(r), "cap": cap_of(r),
                 "events": [[act, addr, size] for act, addr, size in events(r)
                            if act in ("alloc", "free_completed", "segment_alloc", "segment_map", "oom")]}
                for r in runs if (r["lesson"], r["variant"], json.dumps(r["overrides"])) in FIXTURE_RUNS]
        with gzip.open(args.fixture, "wt") as f:
            json.dump(keep, f, separators=(",", ":"))
        print(f"wrote {len(keep)} runs to {args.fixture}")


if __name__ == "__main__":
    main()
