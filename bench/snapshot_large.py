"""Large snapshots: the full load against its bounds, and the streamed --window path (issue 40).

    python bench/snapshot_large.py                    # a 495 MB pickle: full load, then a window
    python bench/snapshot_large.py --size-mb 100      # smaller, quicker
    python bench/snapshot_large.py --size-mb 1200 --no-full   # past the full-load limit
    python bench/snapshot_large.py --file dump.pickle --window 60s:90s

The synthetic pickle has the structure of `torch.cuda.memory._snapshot()` (segments with blocks,
device_traces with action / addr / size / stream / time_us / frames, allocator_settings; frame
lists shared between a block's events as PyTorch shares them), built by bench/snapshot_open.py's
training-loop generator and written with pickle protocol 4 to a temporary folder, removed after.

Each measurement runs in a fresh child process: `open_summary` (what `memlab view` does before
it draws), its wall time, and the child's peak RSS from resource.getrusage. Bounds (issue 40):
a pickle up to 500 MB opens whole within 15 s and 4 GB on 2 cores; past that, --window streams
in memory that follows the window. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BYTES_PER_ENTRY = 62.7  # what snapshot_open.build's entries take in a protocol-4 pickle
FULL_S, FULL_GB = 15.0, 4.0


def _build(path: str, size_mb: float) -> int:
    sys.path.insert(0, str(ROOT / "bench"))
    from snapshot_open import build

    entries = int(size_mb * 1e6 / BYTES_PER_ENTRY)
    snap = build(entries)
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return entries


def _measure(path: str, window: str | None) -> dict:
    import resource

    from lab.snapshots import open_summary

    t0 = time.perf_counter()
    [s] = open_summary(path, window=window)
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    return {"seconds": round(seconds, 2), "peak_rss_bytes": rss, "entries": s.events,
            "of": (s.window or {}).get("of", s.events), "peak_bytes": s.peak_bytes,
            "live_bytes": s.live_bytes}


def _child(*args: str) -> dict:
    r = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    if r.returncode:
        raise SystemExit(f"child failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.splitlines()[-1])


def _line(what: str, size: int, r: dict, bound: str) -> str:
    rate = r["seconds"] / max(r["of"], 1) * 1e6
    return (f"{what:<26} {size / 1e6:8.1f} MB  {r['seconds']:7.2f} s  "
            f"{r['peak_rss_bytes'] / 1e9:6.2f} GB peak RSS  {r['entries']:>10,} of {r['of']:,} "
            f"entries ({rate:.1f} µs an entry read)  {bound}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=float, default=495.0, help="synthetic pickle size (MB)")
    ap.add_argument("--file", help="measure this snapshot instead of a synthetic one")
    ap.add_argument("--window", help="the window to stream (default: the middle tenth's entries)")
    ap.add_argument("--no-full", action="store_true", help="skip the full load")
    ap.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)  # child: PATH WINDOW|-
    ap.add_argument("--build", nargs=2, help=argparse.SUPPRESS)  # child: PATH SIZE_MB
    args = ap.parse_args()
    if args.measure:
        path, window = args.measure
        print(json.dumps(_measure(path, None if window == "-" else window)))
        return 0
    if args.build:
        print(json.dumps({"entries": _build(args.build[0], float(args.build[1]))}))
        return 0
    tmp = None
    path = args.file
    if path is None:
        tmp = tempfile.TemporaryDirectory(prefix="memlab-bench-")
        path = os.path.join(tmp.name, "snapshot.pickle")
        t = time.perf_counter()
        entries = _child("--build", path, str(args.size_mb))["entries"]
        print(f"built {entries:,} entries, {os.path.getsize(path) / 1e6:.1f} MB, in "
              f"{time.perf_counter() - t:.0f} s", file=sys.stderr)
    try:
        size = os.path.getsize(path)
        load1 = os.getloadavg()[0]
        print(f"{os.cpu_count()} cores, load average {load1:.2f} before (others slow every "
              "number below)")
        full = None
        if not args.no_full and size <= 500e6:
            full = _child("--measure", path, "-")
            ok = full["seconds"] <= FULL_S and full["peak_rss_bytes"] <= FULL_GB * 1e9
            print(_line("full load", size, full,
                        f"{'within' if ok else 'OVER'} {FULL_S:.0f} s and {FULL_GB:.0f} GB"))
        window = args.window
        if window is None:
            n = full["of"] if full else int(size / BYTES_PER_ENTRY)
            window = f"{int(n * 0.45)}:{int(n * 0.55)}"
        win = _child("--measure", path, window)
        bounded = f"(memory: {win['peak_rss_bytes'] / max(size, 1):.2f}× the file)"
        print(_line(f"--window {window}", size, win, bounded))
        if full:
            print(f"{'full load, memory':<26} {full['peak_rss_bytes'] / max(size, 1):.2f}× the file")
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
