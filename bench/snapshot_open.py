"""Open a 1,000,000-entry memory snapshot: load + summarize + first timeline + first plot draw.

    python bench/snapshot_open.py                 # build a synthetic snapshot, then time it
    python bench/snapshot_open.py --entries 200000
    python bench/snapshot_open.py --file dump_snapshot.pickle   # time a real one

The synthetic file is shaped like what `torch.cuda.memory._dump_snapshot()` writes for a training
loop recorded with `stacks="python"`: alloc / free_requested / free_completed / segment_alloc
entries with time_us, addresses reused the way the caching allocator reuses them, and frame dicts
shared between stacks (PyTorch symbolizes each unique frame once, so a real pickle memoizes them).

The measurement runs in a fresh child process so its peak RSS is the viewer's alone. Target
(issue 5): under 3 s on the 2-core dev machine. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _frame(filename: str, line: int, name: str) -> dict:
    return {"filename": filename, "line": line, "name": name}


def build(entries: int, seed: int = 0, layers: int = 24) -> dict:
    """A training loop: setup, then steps of forward (activations kept for backward),
    backward (activations freed, gradients made), optimizer step, zero_grad."""
    rng = random.Random(seed)
    torch_dir = "/usr/lib/python3.11/site-packages/torch"
    f_train = [_frame("/home/me/proj/train.py", 40 + i, "train") for i in range(10)]
    f_model = [_frame("/home/me/proj/model.py", 100 + i, "forward") for i in range(60)]
    f_init = [_frame("/home/me/proj/model.py", 20 + i, "__init__") for i in range(10)]
    f_mod = [_frame(f"{torch_dir}/nn/modules/module.py", 1750, "_call_impl"),
             _frame(f"{torch_dir}/nn/modules/linear.py", 125, "forward")]
    f_opt = [_frame(f"{torch_dir}/optim/adamw.py", 300 + i, "_multi_tensor_adamw") for i in range(5)]
    f_step = _frame(f"{torch_dir}/optim/optimizer.py", 480, "wrapper")
    out: list[dict] = []
    t = [1_700_000_000_000_000]
    free_by_size: dict[int, list[int]] = {}
    next_addr = [0x7F00_0000_0000]
    segments: dict[int, int] = {}  # addr -> size (one block per segment: simple and valid)
    live: dict[int, tuple[int, list]] = {}

    def tick():
        t[0] += rng.randint(1, 30)
        return t[0]

    def alloc(size: int, frames: list) -> int:
        pool = free_by_size.get(size)
        if pool:
            addr = pool.pop()
        else:
            addr = next_addr[0]
            next_addr[0] += size + 512 * 1024
            segments[addr] = size
            out.append({"action": "segment_alloc", "addr": addr, "size": size, "stream": 0,
                        "time_us": tick(), "frames": frames})
        live[addr] = (size, frames)
        out.append({"action": "alloc", "addr": addr, "size": size, "stream": 0,
                    "time_us": tick(), "frames": frames})
        return addr

    def free(addr: int) -> None:
        size, frames = live.pop(addr)
        out.append({"action": "free_requested", "addr": addr, "size": size, "stream": 0,
                    "time_us": tick(), "frames": frames})
        out.append({"action": "free_completed", "addr": addr, "size": size, "stream": 0,
                    "time_us": tick(), "frames": frames})
        free_by_size.setdefault(size, []).append(addr)

    hidden = 2048 * 4
    params = [alloc(hidden * hidden * 4 // 4 * (1 + i % 3), [f_init[i % 10], f_train[0]])
              for i in range(layers * 4)]
    grads: list[int] = []
    while len(out) < entries:
        acts = []
        for layer in range(layers):  # forward: a few kept, a few temporaries
            for k in range(8):
                stack = [f_mod[1], f_mod[0], f_model[(layer * 8 + k) % 60], f_train[1]]
                a = alloc(512 * rng.choice((256, 512, 1024, 4096)), stack)
                if k % 3 == 0:
                    free(a)
                else:
                    acts.append(a)
        for a in reversed(acts):  # backward on the autograd thread: no Python stack
            free(a)
            if len(grads) < len(params) and rng.random() < 0.1:
                grads.append(alloc(live[params[len(grads)]][0], []))
            tmp = alloc(512 * 256, [])
            free(tmp)
        if not hasattr(build, "_state"):  # optimizer state, once
            build._state = [alloc(live[p][0], [f_opt[i % 5], f_step, f_train[2]])
                            for i, p in enumerate(params)]
        for _ in range(layers):  # foreach temporaries
            tmp = alloc(512 * 2048, [f_opt[0], f_step, f_train[2]])
            free(tmp)
        if rng.random() < 0.5:  # zero_grad(set_to_none=True) every other step
            for g in grads:
                free(g)
            grads = []
    del out[entries:]
    if hasattr(build, "_state"):
        del build._state
    # the final state: the blocks still live at the end of the (truncated) trace
    live_end: dict[int, int] = {}
    for e in out:
        if e["action"] == "alloc":
            live_end[e["addr"]] = e["size"]
        elif e["action"] == "free_completed":
            live_end.pop(e["addr"], None)
    segs = []
    for addr, size in segments.items():
        state = "active_allocated" if addr in live_end else "inactive"
        segs.append({"device": 0, "address": addr, "total_size": size, "stream": 0,
                     "segment_type": "large", "segment_pool_id": (0, 0),
                     "allocated_size": size if state != "inactive" else 0,
                     "active_size": size if state != "inactive" else 0,
                     "requested_size": size, "is_expandable": False,
                     "blocks": [{"address": addr, "size": size, "requested_size": size,
                                 "state": state, "frames": []}]})
    return {"segments": segs, "device_traces": [out], "allocator_settings": {}}


def measure(path: str, width: int) -> dict:
    import resource

    t0 = time.perf_counter()
    from lab.snapshots import open_summary
    from lab.snapshots.unpickle import load_plain

    t_import = time.perf_counter() - t0
    t1 = time.perf_counter()
    [summary] = open_summary(path)  # cold: the first thing this process does
    t_summary = time.perf_counter() - t1
    t2 = time.perf_counter()
    xs, ys = summary.series(2 * width)
    t_series = time.perf_counter() - t2
    t3 = time.perf_counter()
    import plotext as plt

    t_plotext_import = time.perf_counter() - t3
    t4 = time.perf_counter()
    plt.clear_figure()
    plt.plotsize(width, 30)
    plt.plot([x / 1e6 for x in xs], [y / 2**30 for y in ys])
    rx, ry = summary.reserved_series()
    if rx:
        plt.plot([x / 1e6 for x in rx], [y / 2**30 for y in ry])
    plt.build()
    t_draw = time.perf_counter() - t4
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"entries": summary.events, "peak_bytes": summary.peak_bytes,
           "live_at_peak": summary.live_count}
    del summary, xs, ys
    t5 = time.perf_counter()  # for the record: how much of the open is the unpickling alone
    with open(path, "rb") as f:
        load_plain(f)
    t_load_only = time.perf_counter() - t5
    return {
        "entries": out["entries"],
        "file_mb": round(os.path.getsize(path) / 1e6, 1),
        "import_s": round(t_import, 3),
        "load_and_summarize_s": round(t_summary, 3),
        "of_which_unpickle_s": round(t_load_only, 3),
        "first_timeline_s": round(t_series, 3),
        "plotext_import_s": round(t_plotext_import, 3),
        "first_draw_s": round(t_draw, 3),
        "total_s": round(t_summary + t_series + t_draw, 3),
        "peak_rss_mb": round(rss, 1),
        "peak_bytes": out["peak_bytes"],
        "live_at_peak": out["live_at_peak"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--file", help="time this snapshot instead of a synthetic one")
    ap.add_argument("--width", type=int, default=120, help="plot width in characters")
    ap.add_argument("--keep", action="store_true", help="keep the synthetic file")
    ap.add_argument("--measure", help=argparse.SUPPRESS)  # child mode
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.width)))
        return 0
    path = args.file
    if path is None:
        t0 = time.perf_counter()
        snap = build(args.entries)
        fd, path = tempfile.mkstemp(suffix=".pickle", prefix="memlab-bench-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(snap, f, protocol=4)
        del snap
        print(f"built {args.entries:,} entries in {time.perf_counter() - t0:.1f} s -> {path}",
              file=sys.stderr)
    try:
        child = subprocess.run([sys.executable, __file__, "--measure", path, "--width",
                                str(args.width)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
        if child.returncode:
            print(child.stderr, file=sys.stderr)
            return child.returncode
        r = json.loads(child.stdout)
    finally:
        if args.file is None and not args.keep:
            os.unlink(path)
    for k, v in r.items():
        print(f"{k:>22}: {v}")
    load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{'load average (1 min)':>22}: {load1:.2f} on {os.cpu_count()} cores "
          "(other processes slow every number above)")
    verdict = "under" if r["total_s"] < 3 else "OVER"
    print(f"\nopen + summarize + first timeline + first draw: {r['total_s']:.2f} s "
          f"({verdict} the 3 s target), peak RSS {r['peak_rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
