"""A CNN script's GPU allocator history against sim: where the reserved memory parts ways.

    python bench/cnn_trace_replay.py GPU.pkl.gz [GPU2.pkl.gz ...] [--sim]

Each file is `conv_workspace.py trace --save` on the GPU (the allocator's whole history of one
zoo CNN script; frames kept only on requests of 64 MiB or more). Printed per file:

1. the GPU's own max allocated / reserved;
2. its history replayed through sim's allocator model (lab.measure.sim.allocator), with the GPU's
   segment addresses and with the model's synthetic ones: whether the model, fed the GPU's own
   requests, reaches the GPU's reserved memory (if not, the allocator model is what misses);
3. with --sim, the same script in sim (`memlab profile --mode sim --gpu CARD --json --snapshot`,
   this machine's CPU): sim's own predicted max allocated / reserved, then sim's requests
   against the GPU's, the first place their sizes part ways (in allocations of 1 MiB or more)
   and the sizes one has that the other lacks (64 MiB or more). If the GPU's own requests replay
   to the GPU's reserved memory but sim's prediction does not, the requests are what misses,
   and the lists say which.

Issue 37 found this way (with the GPU's measured workspaces in place of the histories) that
cuDNN's benchmark empties the allocator's cache after each search; the histories confirm it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import pickle
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lab.measure.sim.allocator.replay import replay_cuda_trace  # noqa: E402

sys.path.insert(0, str(ROOT / "bench" / "ground_truth"))
from zoo_report import card_key  # noqa: E402

MiB = 2**20
ZOO = ROOT / "bench" / "ground_truth"


def _requests(snapshot: dict) -> list[tuple[str, int, int]]:
    """(action, addr, size) of device 0's history, as replay_cuda_trace takes them."""
    return [(e["action"], e.get("addr", 0), e.get("size", 0))
            for e in snapshot["device_traces"][0]]


def _sizes(events: list[tuple[str, int, int]], floor: int) -> list[int]:
    return [size for act, _, size in events if act == "alloc" and size >= floor]


def _sim_run(script_and_args: str, card: str, benchmark: str) -> tuple[dict, dict]:
    """Sim's result (JSON) and allocator history of the script as the GPU ran it (`benchmark`
    "off": pinned off, as `conv_workspace.py trace --benchmark off` pinned it)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sim.pkl"
        argv = shlex.split(script_and_args)
        pinned = [str(ZOO / "pinned_benchmark.py")] if benchmark == "off" else []
        cmd = [sys.executable, "-m", "lab", "profile", "--mode", "sim", "--gpu", card,
               "--quiet", "--json", "--snapshot", str(path), "--", "python", *pinned,
               str(ZOO / argv[0]), *argv[1:]]
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
        with open(path, "rb") as f:
            return json.loads(out), pickle.load(f)


def compare(gpu_file: Path, with_sim: bool) -> None:
    with gzip.open(gpu_file, "rb") as f:
        snap = pickle.load(f)
    meta = snap.get("memlab_trace", {})
    events = _requests(snap)
    print(f"== {gpu_file.name}: {meta.get('script', '?')} (benchmark {meta.get('benchmark', '?')},"
          f" {meta.get('gpu', '?')}, torch {meta.get('torch', '?')})")
    print(f"GPU:                      max allocated {meta.get('max_allocated', 0) / 1e9:8.3f} GB, "
          f"reserved {meta.get('max_reserved', 0) / 1e9:8.3f} GB")
    for label, real in (("GPU's addresses", True), ("synthetic addresses", False)):
        r = replay_cuda_trace(events, real_addresses=real)
        print(f"model on its requests, {label:19s}: allocated {r['allocated'] / 1e9:8.3f} GB, "
              f"reserved {r['reserved'] / 1e9:8.3f} GB, retries {r['retries']}")
    if not with_sim:
        return
    # the script as traced ("zoo/resnet.py --depth 50 ..."), on the same card
    result, sim = _sim_run(meta.get("script", ""), card_key(meta.get("gpu")),
                           meta.get("benchmark", "script"))
    sim_events = _requests(sim)
    predicted = result["allocator"]
    print(f"sim's prediction:         allocated {predicted['peak_allocated_bytes'] / 1e9:8.3f} GB, "
          f"reserved {predicted['peak_reserved_bytes'] / 1e9:8.3f} GB")
    gpu_sizes, sim_sizes = _sizes(events, MiB), _sizes(sim_events, MiB)
    first = next((i for i, (a, b) in enumerate(zip(gpu_sizes, sim_sizes)) if a != b), None)
    print(f"requests of 1 MiB or more: GPU {len(gpu_sizes):,}, sim {len(sim_sizes):,}; "
          f"first different at #{first}" if first is not None else "the same sizes in order")
    if first is not None:
        print(f"  GPU  {[round(s / MiB, 1) for s in gpu_sizes[first:first + 8]]} MiB")
        print(f"  sim  {[round(s / MiB, 1) for s in sim_sizes[first:first + 8]]} MiB")
    gpu_big, sim_big = Counter(_sizes(events, 64 * MiB)), Counter(_sizes(sim_events, 64 * MiB))
    only_gpu, only_sim = gpu_big - sim_big, sim_big - gpu_big
    print(f"  64 MiB+ only the GPU asked for: {_listed(only_gpu)}")
    print(f"  64 MiB+ only sim asked for:     {_listed(only_sim)}")


def _listed(sizes: Counter) -> str:
    top = sorted(sizes.items(), reverse=True)[:12]
    return ", ".join(f"{s / MiB:,.1f} x{n}" for s, n in top) or "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--sim", action="store_true", help="also run the script in sim and compare")
    args = ap.parse_args(argv)
    for path in args.files:
        compare(path, args.sim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
