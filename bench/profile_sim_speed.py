"""Seconds for `memlab profile --mode sim` of a GPT-2 small training script, 3 optimizer steps.

    python bench/profile_sim_speed.py [--batch 8] [--seq 1024] [--steps 3] [--keep DIR]

Writes a plain CUDA training script (GPT-2 small from assets/models/gpt2.json, random weights,
built on the CPU and moved with .cuda(); bf16 autocast, AdamW at its defaults, .item() logging),
runs it unmodified through `memlab profile --mode sim --steps N --json` in a fresh process (the
runner's worker: what a user waits for, imports included) and prints the seconds, the worker's
own seconds (RunResult.wall_s) and the prediction. Target (issue 22): under 60 s on 2 cores.
Numbers only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = '''\
import json, sys
import torch
from transformers import GPT2Config, GPT2LMHeadModel

batch, seq = int(sys.argv[1]), int(sys.argv[2])
config = GPT2Config(**json.load(open(sys.argv[3])))
model = GPT2LMHeadModel(config).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(1000):
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step} loss {loss.item():.4f} max allocated "
          f"{torch.cuda.max_memory_allocated() / 1e9:.2f} GB")
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--keep", help="write the script here instead of a temporary folder")
    args = ap.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="memlab-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "train_gpt2_small.py"
    script.write_text(SCRIPT)
    config = json.loads((ROOT / "assets" / "models" / "gpt2.json").read_text())
    config_path = folder / "gpt2.json"
    config_path.write_text(json.dumps({k: v for k, v in config.items() if not k.startswith("_")}))
    cmd = [sys.executable, "-m", "lab", "profile", "--mode", "sim", "--steps", str(args.steps),
           "--json", "--quiet", "--", "python", str(script), str(args.batch), str(args.seq),
           str(config_path)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMLAB_HOME": tempfile.mkdtemp()}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return 1
    r = json.loads(proc.stdout)
    a = r["allocator"]
    print(f"GPT-2 small, batch {args.batch} x {args.seq}, {args.steps} optimizer steps, "
          f"{os.cpu_count()} cores")
    print(f"memlab profile --mode sim: {seconds:.1f} s (the worker's measurement: "
          f"{r['wall_s']:.1f} s; the rest is starting Python and importing torch)")
    print(f"predicted on {r['device']['name']}: max allocated {a['peak_allocated_bytes']:,} B, "
          f"max reserved {a['peak_reserved_bytes']:,} B; tensors' peak {r['peak']['bytes']:,} B "
          f"in {r['peak']['phase']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
