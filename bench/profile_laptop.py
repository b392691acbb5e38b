"""Peak RSS and seconds of `memlab profile --mode sim` for a user's training script of a 1 B, an
8 B and a 30 B-class MoE layout: can a laptop answer "will my fine-tune fit?" (issue 37 item 0).

    python bench/profile_laptop.py [--gpu h100] [--steps 3] [--only llama-3.1-8b]

Each case runs the zoo's plain training script unmodified (bench/ground_truth/zoo/causal_lm.py:
`AutoModelForCausalLM.from_config(cfg).to("cuda")`, AdamW, bf16 autocast, batch 1 x 512, random
weights from the published config) through `python -m lab profile --mode sim --json` in a fresh
process, as a user would. Printed: the wall seconds, the peak RSS of that process and everything
it waited for (getrusage of the children: the CLI and its worker), and the prediction (or the
predicted out-of-memory). The model is built on the host with its weights as placeholders
(lab.measure.sim.facade.placeholders), so neither its bytes nor its random initialisation are
paid here. Target: the 8 B script under 6 GiB of RSS on 2 cores. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "ground_truth" / "zoo" / "causal_lm.py"
CASES = {  # config -> what it stands for
    "llama-3.2-1b": "Llama-3.2-1B layout (1.24 B parameters)",
    "llama-3.1-8b": "Llama-3.1-8B layout (8.03 B parameters)",
    "qwen3-30b-a3b": "Qwen3-30B-A3B layout (30.5 B parameters, 128 experts, top-8)",
}


def run(config: str, gpu: str, steps: int) -> None:
    cmd = [sys.executable, "-m", "lab", "profile", "--mode", "sim", "--gpu", gpu, "--steps",
           str(steps), "--json", "--quiet", "--", "python", str(SCRIPT), "--config", config,
           "--batch", "1", "--seq", "512", "--bf16", "--steps", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMLAB_HOME": tempfile.mkdtemp()}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=SCRIPT.parent, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, the largest child yet
    rss_text = f"{rss / 2**20:.2f} GiB" if rss > before else f"<= {before / 2**20:.2f} GiB"
    print(f"{config}: {CASES[config]}")
    try:
        r = json.loads(proc.stdout)
    except ValueError:
        print(f"  exit {proc.returncode} after {seconds:.1f} s, peak RSS {rss_text}; "
              f"stderr: {proc.stderr.strip()[-600:]}")
        return
    a = r.get("allocator") or {}
    verdict = ("predicted out of memory" if r.get("status") == "oom" or "out of memory" in str(
        r.get("error") or "").lower() else f"status {r.get('status')}")
    print(f"  {seconds:.1f} s (worker {r.get('wall_s', 0):.1f} s), peak RSS {rss_text}; "
          f"{verdict} on {r.get('device', {}).get('name')}: max allocated "
          f"{a.get('peak_allocated_bytes', 0):,} B, max reserved "
          f"{a.get('peak_reserved_bytes', 0):,} B (torch {r.get('torch_version')}, "
          f"transformers {r.get('transformers_version')})")
    notes = [n for n in r.get("notes", []) if "placeholder" in n]
    if notes:
        print(f"  note: {notes[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--only", choices=sorted(CASES), action="append")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(f"memlab profile --mode sim --gpu {args.gpu}, batch 1 x 512, {args.steps} steps; "
          f"{os.cpu_count()} cores, load average {load:.1f}")
    for config in args.only or CASES:
        run(config, args.gpu, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
