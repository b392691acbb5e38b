"""CUDA allocator traces of side-stream patterns, for the allocator model's streams (issue 42).

    python bench/stream_traces.py --out DIR              on a CUDA GPU: record, then check
    python bench/stream_traces.py --out DIR --check      here: replay DIR's traces (or the fixture)
    python bench/stream_traces.py --out DIR --cpu        here: a dry run of the patterns (no trace)
    python bench/stream_traces.py --out DIR --sim        here: sim's predictions of each pattern
                                                         (the script through the CUDA facade)

Each pattern runs in a process of its own (nothing cached or live from another: a cuBLAS
workspace made by one pattern would sit in the next one's peak), with the allocator's history on
(no stacks):

    side_copy            a tensor made on the compute stream, copied to pinned memory on a side
                         stream, t.record_stream(side), freed; the compute stream allocates the
                         same size again at once
    side_copy_no_record  the same without record_stream (the block is reused at once)
    prefetch_ring        weights prefetched host -> device on a side stream, two in flight, used
                         on the compute stream (record_stream(compute)): blocks of the side
                         stream's pool, freed from the compute stream
    offload              lesson 28's overlapped offload on a stack of bf16 Linear + GeLU layers:
                         saved tensors copied on a side stream with record_stream, backward

Writes DIR/stream_traces.json.gz (every pattern: the allocator's entries (action, addr, size,
stream), memory_stats' peaks, the device) and, with --fixture, the same into
tests/fixtures/h200_stream_traces.json.gz, which tests/unit/test_allocator_stream_traces.py
replays. `--check` replays each through lab.measure.sim.allocator.stream_trace, each free
completed where the GPU completed it, and prints the model minus the GPU (peak allocated,
reserved; to the byte is the goal). Under 30 s on an H100/H200.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FIXTURE = ROOT / "tests/fixtures/h200_stream_traces.json.gz"
PATTERNS = ("side_copy", "side_copy_no_record", "prefetch_ring", "offload")
KEEP = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
        "segment_map", "segment_unmap", "oom")
MiB = 1 << 20


def _side_copy(torch, dev, record: bool) -> None:
    side = torch.cuda.Stream()
    host = [torch.empty(64 * MiB // 4, pin_memory=True) for _ in range(2)]
    for i in range(8):
        x = torch.full((64 * MiB // 4,), float(i), device=dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            host[i % 2].copy_(x, non_blocking=True)
        if record:
            x.record_stream(side)
        del x
        y = torch.empty(64 * MiB // 4, device=dev)  # x's block, if it is free
        y.fill_(1.0)
        del y
    torch.cuda.synchronize()


def _prefetch_ring(torch, dev) -> None:
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    weights = [torch.randn(2048, 4096, pin_memory=True) for _ in range(8)]
    x = torch.randn(1024, 2048, device=dev)
    ring = []

    def fetch(i):
        side.wait_stream(main)  # the slot it may reuse has been read
        with torch.cuda.stream(side):
            w = weights[i].to(dev, non_blocking=True)  # a block of the side stream's pool
        ring.append(w)

    fetch(0)
    fetch(1)
    for i in range(len(weights)):
        main.wait_stream(side)
        w = ring.pop(0)
        w.record_stream(main)  # used on the compute stream: freed, it waits for it
        x = torch.relu(x @ w)[:, :2048].contiguous()
        del w
        if i + 2 < len(weights):
            fetch(i + 2)
    torch.cuda.synchronize()


def _offload(torch, dev) -> None:
    side, main = torch.cuda.Stream(), torch.cuda.current_stream()
    layers = [torch.nn.Linear(2048, 2048, device=dev, dtype=torch.bfloat16) for _ in range(6)]
    x = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def pack(t):
        if isinstance(t, torch.nn.Parameter) or t.numel() * t.element_size() < MiB:
            return t
        side.wait_stream(main)
        with torch.cuda.stream(side):
            host = torch.empty(t.size(), dtype=t.dtype, pin_memory=True)
            host.copy_(t, non_blocking=True)
        t.record_stream(side)
        return host, t.device

    def unpack(packed):
        if isinstance(packed, torch.Tensor):
            return packed
        host, device = packed
        main.wait_stream(side)
        return host.to(device, non_blocking=True)

    for _ in range(2):
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            h = x
            for layer in layers:
                h = torch.nn.functional.gelu(layer(h))
            loss = h.float().pow(2).mean()
        loss.backward()
        torch.cuda.synchronize()
        for layer in layers:
            layer.weight.grad = layer.bias.grad = None
        x.grad = None


def job(pattern: str, cpu: bool = False) -> dict:
    import torch

    if cpu:  # a dry run: the patterns' Python, on nothing
        return {"pattern": pattern, "cpu": True}
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python")
    t0 = time.perf_counter()
    run_pattern(torch, pattern)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    ms = torch.cuda.memory_stats()
    entries = [[e["action"], e["addr"], e["size"], e["stream"]]
               for e in snap["device_traces"][0] if e["action"] in KEEP]
    return {"pattern": pattern, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "seconds": round(seconds, 3), "entries": entries,
            "real": {"allocated": ms["allocated_bytes.all.peak"],
                     "reserved": ms["reserved_bytes.all.peak"],
                     "active": ms["active_bytes.all.peak"],
                     "retries": ms["num_alloc_retries"]}}


def sim_predictions(out: Path) -> None:
    """Each pattern as `memlab profile --mode sim` runs a script: peak allocated and reserved by
    the allocator model's rule (an event completes at its stream's next synchronisation)."""
    from lab.measure.measure import measure_variant
    from lab.profile import script as experiment

    out.mkdir(parents=True, exist_ok=True)
    print(f"{'pattern':22} {'sim alloc':>14} {'resv':>14}")
    for p in PATTERNS:
        wrapper = out / f"sim_{p}.py"
        wrapper.write_text(f"import sys, torch\nsys.path.insert(0, {str(ROOT / 'bench')!r})\n"
                           f"import stream_traces\nstream_traces.run_pattern(torch, {p!r})\n")
        params = {"target": str(wrapper), "module": False, "args": [], "timeout_s": 0,
                  "output_path": None, "steps": None, "gpu": None}
        r = measure_variant(experiment.script, lesson="profile", variant="script", mode="sim",
                            scale="", params=params, timing=False)
        if r.status != "ok":
            print(f"{p:22} {r.status}: {r.error}")
            continue
        a = r.allocator
        print(f"{p:22} {a.peak_allocated_bytes:>14,} {a.peak_reserved_bytes:>14,}")


def run_pattern(torch, pattern: str) -> None:
    dev = torch.device("cuda")
    if pattern.startswith("side_copy"):
        _side_copy(torch, dev, record=pattern == "side_copy")
    elif pattern == "prefetch_ring":
        _prefetch_ring(torch, dev)
    else:
        _offload(torch, dev)


def check(runs: list[dict]) -> list[tuple[str, int, int]]:
    """Each run replayed with the GPU's completions: (pattern, model - GPU allocated, reserved)."""
    from lab.measure.sim.allocator.stream_trace import replay_stream_trace

    print(f"{'pattern':22} {'GPU alloc':>14} {'resv':>14} {'waited':>6} | model - GPU: alloc  resv  active")
    out = []
    for r in runs:
        got = replay_stream_trace([tuple(e) for e in r["entries"]])
        real = r["real"]
        da, dr = got["allocated"] - real["allocated"], got["reserved"] - real["reserved"]
        print(f"{r['pattern']:22} {real['allocated']:>14,} {real['reserved']:>14,} "
              f"{got['waited']:>6} | {da:>+10,} {dr:>+10,} {got['active'] - real['active']:>+10,}")
        out.append((r["pattern"], da, dr))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--check", action="store_true", help="replay DIR's traces through the model")
    ap.add_argument("--fixture", action="store_true", help=f"also write {FIXTURE.relative_to(ROOT)}")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU (no allocator trace)")
    ap.add_argument("--sim", action="store_true", help="sim's predictions of each pattern")
    ap.add_argument("--job", help=argparse.SUPPRESS)
    args = ap.parse_args()
    out = Path(args.out)
    if args.sim:
        sim_predictions(out)
        return
    whole = out / "stream_traces.json.gz"
    if args.job:
        (out / f"{args.job}.json").write_text(json.dumps(job(args.job, args.cpu)))
        return
    if args.check:
        src = whole if whole.is_file() else FIXTURE
        check(json.loads(gzip.open(src, "rt").read()))
        return
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for p in PATTERNS:
        proc = subprocess.run([sys.executable, __file__, "--out", str(out), "--job", p]
                              + (["--cpu"] if args.cpu else []),
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
        f = out / f"{p}.json"
        if proc.returncode or not f.is_file():
            print(f"{p}: failed (rc {proc.returncode}): {proc.stderr[-800:]}")
            continue
        runs.append(json.loads(f.read_text()))
        f.unlink()
    if args.cpu:
        print(f"dry run: {len(runs)}/{len(PATTERNS)} patterns ran")
        return
    if len(runs) < len(PATTERNS):  # nothing written: a second call records them all again
        raise SystemExit(f"stream traces: {len(runs)}/{len(PATTERNS)} patterns recorded; none written")
    with gzip.open(whole, "wt") as fh:
        json.dump(runs, fh, separators=(",", ":"))
    if args.fixture:
        FIXTURE.write_bytes(whole.read_bytes())
    check(runs)


if __name__ == "__main__":
    main()
