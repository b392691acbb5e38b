"""Where a CNN script's memory goes on the GPU that sim does not model: cuDNN's workspaces.

    python conv_workspace.py trace [--benchmark on|off|script] [--save FILE.pkl.gz] \
        [--stacks python|all] -- SCRIPT.py ARGS...
    python conv_workspace.py table [--scripts zoo] [--out FILE.json]

trace   runs the script unmodified (runpy) under the allocator's history and prints, from the
        history, the moment of max allocated: the blocks alive then, grouped by the line that
        made them (no Python frame: an allocation of backward's thread), the allocation that made
        the peak, and every short-lived allocation of 64 MiB or more (a convolution's workspace is
        allocated and freed inside one call). `--benchmark off` keeps `cudnn.benchmark` False
        whatever the script sets (to see what the benchmark search adds). `--save` also keeps the
        allocator's whole history (the snapshot, gzipped pickle; frames only on requests of
        64 MiB or more, `--stacks all` adding ATen's) for bench/cnn_trace_replay.py, which
        replays it through sim's allocator model.
table   the convolutions of the zoo's CNN cases (shapes taken by running each model on the
        meta device), each measured alone on the GPU: how far above its inputs and outputs the
        allocator's peak goes in forward, in backward's grad-input and in its grad-weight, with
        `cudnn.benchmark` on (the first call: the search; the second: the plan it chose) and off.
        One JSON row per convolution and direction.

No lab code (like peak_of.py): these are the ground truth's measurements. The zoo's scripts are
ours (bench/ground_truth/zoo), not public code.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
from collections import defaultdict
from pathlib import Path

MiB = 2**20
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from pinned_benchmark import pin_benchmark  # noqa: E402
from snapshot_of import run_script  # noqa: E402


# ---- trace ------------------------------------------------------------------------------------
def _where(frames: list[dict]) -> str:
    """The first frame outside torch (the script's line), else the innermost torch frame."""
    if not frames:
        return "(no Python frame: backward's thread or C++)"
    for f in frames:
        if "/torch/" not in f["filename"] and "conv_workspace" not in f["filename"]:
            return f"{os.path.basename(f['filename'])}:{f['line']} {f['name']}"
    f = frames[0]
    return f"{f['filename'].split('/torch/')[-1]}:{f['line']} {f['name']}"


def _telling(frame: dict) -> bool:
    """A frame that says what asked for memory: ATen's, cuDNN's or Python's, not the
    allocator's or the dispatcher's own."""
    name = frame.get("name", "")
    return frame.get("filename", "").endswith(".py") or (
        ("at::native" in name or "cudnn" in name.lower() or "autograd" in name)
        and "CachingAllocator" not in name)


def _inner(frames: list[dict]) -> str:
    if not frames:
        return ""
    f = frames[0]
    return f"{f['filename'].split('/torch/')[-1]}:{f['line']} {f['name']}"


def analyse(snapshot: dict, device: int = 0, top: int = 12) -> dict:
    events = snapshot["device_traces"][device]
    live: dict[int, tuple[int, int]] = {}  # addr -> (size, event index)
    allocated = peak = 0
    peak_at, peak_live = -1, {}
    transient = []
    for i, e in enumerate(events):
        act = e["action"]
        if act == "alloc":
            live[e["addr"]] = (e["size"], i)
            allocated += e["size"]
            if allocated > peak:
                peak, peak_at, peak_live = allocated, i, dict(live)
        elif act == "free_completed" and e["addr"] in live:
            size, j = live.pop(e["addr"])
            allocated -= size
            if size >= 64 * MiB and i - j <= 6:
                transient.append((size, j, _where(events[j].get("frames", [])),
                                  _inner(events[j].get("frames", []))))
    groups: dict[str, int] = defaultdict(int)
    for addr, (size, j) in peak_live.items():
        groups[_where(events[j].get("frames", []))] += size
    made = events[peak_at] if peak_at >= 0 else {}
    by_size: dict[int, int] = defaultdict(int)
    for size, *_ in transient:
        by_size[size] += 1
    return {
        "peak_allocated_from_trace": peak, "peak_event": peak_at, "events": len(events),
        "peak_made_by": {"size": made.get("size"), "where": _where(made.get("frames", [])),
                         "inner": _inner(made.get("frames", []))},
        "alive_at_peak": sorted(groups.items(), key=lambda kv: -kv[1])[:top],
        "short_lived_64MiB_plus": [{"size": s, "at": j, "where": w, "inner": n}
                                   for s, j, w, n in sorted(transient, key=lambda t: -t[0])[:top]],
        "short_lived_count": len(transient),
        "short_lived_sizes": sorted(by_size.items(), key=lambda kv: -kv[0])[:top],
    }


def trace(argv: list[str], benchmark: str, save: str | None = None,
          stacks: str = "python") -> int:
    import torch

    if benchmark != "script":
        pin_benchmark(benchmark == "on")
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks=stacks)
    try:
        run_script(argv)
    finally:
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        out = {"script": " ".join(argv), "benchmark": benchmark,
               "max_allocated": torch.cuda.max_memory_allocated(),
               "max_reserved": torch.cuda.max_memory_reserved(),
               "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), **analyse(snap)}
        print("CONV_TRACE " + json.dumps(out))
        if save:  # the replay needs actions, addresses and sizes; frames are kept only on
            import gzip  # requests of 64 MiB or more (ATen's and Python's, to name what made
            import pickle  # them), so that the file stays small

            for entries in snap["device_traces"]:
                for e in entries:
                    frames = e.pop("frames", None)
                    if frames and e.get("size", 0) >= 64 * MiB:
                        e["frames"] = [f for f in frames if _telling(f)][:24]
            for seg in snap["segments"]:
                for block in seg.get("blocks", []):
                    block.pop("frames", None)
            with gzip.open(save, "wb") as f:
                pickle.dump({**snap, "memlab_trace": out}, f)
    return 0


# ---- table ------------------------------------------------------------------------------------
# (case name, script, args): the zoo's CNN cases (bench/ground_truth/cases.py), as run there
CASES = [
    ("cnn/resnet50-fp32", "resnet.py", ["--depth", "50", "--batch", "128"]),
    ("cnn/resnet50-bf16-cl", "resnet.py", ["--depth", "50", "--batch", "128", "--bf16",
                                           "--channels-last"]),
    ("cnn/resnet101-fp32-cl", "resnet.py", ["--depth", "101", "--batch", "64",
                                            "--channels-last"]),
    ("cnn/unet-bf16", "unet.py", ["--batch", "16", "--image", "512", "--bf16"]),
]


def conv_calls(script: str, args: list[str]) -> list[dict]:
    """Every distinct F.conv2d / conv_transpose2d call of one forward of the script's model,
    found by running the script on the meta device with the convolutions recorded (the script
    runs one step; nothing is computed)."""
    import torch
    import torch.nn.functional as F

    seen: dict[tuple, dict] = {}
    bf16 = "--bf16" in args  # autocast can't run on meta: the script runs in fp32, rows say bf16
    args = [a for a in args if a != "--bf16"]

    def record(kind, orig):
        def wrapped(x, w, bias=None, stride=1, padding=0, *rest, **kw):
            def pair(v):
                return list(v) if isinstance(v, (tuple, list)) else [v, v]
            cl = "--channels-last" in args  # meta kernels don't keep the layout: the script's
            dtype = torch.bfloat16 if bf16 else x.dtype  # autocast's choice for convolutions
            row = {"kind": kind, "x": list(x.shape), "w": list(w.shape),
                   "stride": pair(stride), "padding": pair(padding),
                   "groups": kw.get("groups", rest[-1] if kind == "conv2d" and len(rest) == 2
                                    else 1),
                   "output_padding": pair(rest[0]) if kind == "conv_transpose2d" and rest else [0, 0],
                   "dtype": str(dtype).replace("torch.", ""), "channels_last": bool(cl),
                   "bias": bias is not None, "calls": 0}
            key = json.dumps({k: v for k, v in row.items() if k != "calls"}, sort_keys=True)
            seen.setdefault(key, row)["calls"] += 1
            return orig(x, w, bias, stride, padding, *rest, **kw)
        return wrapped

    saved = F.conv2d, F.conv_transpose2d
    F.conv2d = record("conv2d", F.conv2d)
    F.conv_transpose2d = record("conv_transpose2d", F.conv_transpose2d)
    path = str(HERE / "zoo" / script)
    old_argv = sys.argv
    sys.argv = [path, *args, "--steps", "1", "--device", "meta"]
    try:
        runpy.run_path(path, run_name="__main__")
    except Exception as e:  # noqa: BLE001 - meta can't .item(); the forward has been seen
        if not seen:
            raise
        print(f"(meta run of {script} stopped: {type(e).__name__}; {len(seen)} convolutions seen)",
              file=sys.stderr)
    finally:
        F.conv2d, F.conv_transpose2d = saved
        sys.argv = old_argv
    return list(seen.values())


def measure_conv(row: dict) -> list[dict]:
    import torch

    dev = torch.device("cuda")
    dtype = getattr(torch, row["dtype"])
    fmt = torch.channels_last if row["channels_last"] else torch.contiguous_format
    x = torch.randn(row["x"], device=dev, dtype=dtype).contiguous(memory_format=fmt)
    w = torch.randn(row["w"], device=dev, dtype=dtype).contiguous(memory_format=fmt)
    transposed = row["kind"] == "conv_transpose2d"

    def fwd():
        return torch.ops.aten.convolution(x, w, None, row["stride"], row["padding"], [1, 1],
                                          transposed, row["output_padding"], row["groups"])

    y = fwd()
    gy = torch.randn_like(y)
    del y

    def bwd(mask):
        return torch.ops.aten.convolution_backward(gy, x, w, None, row["stride"], row["padding"],
                                                   [1, 1], transposed, row["output_padding"],
                                                   row["groups"], mask)

    jobs = {"forward": fwd, "grad_input": lambda: bwd([True, False, False]),
            "grad_weight": lambda: bwd([False, True, False])}
    out = []
    for bench in (True, False):
        torch.backends.cudnn.benchmark = bench
        for direction, job in jobs.items():
            for call in ("first", "second") if bench else ("first",):
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                res = job()
                torch.cuda.synchronize()
                res = [r for r in (res if isinstance(res, tuple) else (res,)) if r is not None]
                made = sum(r.untyped_storage().nbytes() for r in res)
                above = torch.cuda.max_memory_allocated() - base - made
                out.append({"direction": direction, "benchmark": bench, "call": call,
                            "workspace_peak": above, "outputs": made})
                del res
    return out


def table(out: str | None) -> int:
    import torch

    rows = []
    for case, script, args in CASES:
        for conv in conv_calls(script, args):
            conv["case"] = case
            try:
                conv["measured"] = measure_conv(conv)
            except torch.OutOfMemoryError as e:
                conv["measured"] = f"oom: {str(e)[:200]}"
            torch.cuda.empty_cache()
            rows.append(conv)
            print("CONV_ROW " + json.dumps(conv), flush=True)
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "rows": rows}
    if out:
        Path(out).write_text(json.dumps(meta, indent=1))
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--benchmark", choices=["on", "off", "script"], default="script")
    t.add_argument("--save", help="also write the allocator's history here (.pkl.gz)")
    t.add_argument("--stacks", choices=["python", "all"], default="python",
                   help="all: C++ frames too (slower; they name the ATen function of a block)")
    t.add_argument("script", nargs=argparse.REMAINDER)
    tb = sub.add_parser("table")
    tb.add_argument("--out")
    a = ap.parse_args(argv)
    if a.cmd == "trace":
        script = a.script[1:] if a.script[:1] == ["--"] else a.script
        return trace(script, a.benchmark, a.save, a.stacks)
    return table(a.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
