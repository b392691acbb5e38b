"""Seconds for `memlab profile --mode sim` of a GPT-2 small training script, 3 optimizer steps,
and its prediction beside the H200's own numbers for the same loop.

    python bench/profile_sim_speed.py [--batch 8] [--seq 1024] [--steps 3] [--host] [--keep DIR]

Writes a plain CUDA training script, the loop of bench/h200_ground_truth.py (GPT-2 small from
assets/models/gpt2.json with random weights built under `torch.device("cuda")`, bf16 autocast,
AdamW, `model(input_ids=ids, labels=ids).loss`; `--host`: built on the CPU and moved with
.cuda() instead), logging `.item()` and torch.cuda.max_memory_allocated() each step; runs it
unmodified through `memlab profile --mode sim --steps N --json` in a fresh process (the runner's
worker: what a user waits for, imports included) and prints the seconds, the worker's own
seconds (RunResult.wall_s) and the prediction, then the H200's max allocated / reserved for the
loop from assets/ground_truth/h200_hf_loop.json (torch 2.11, transformers 5.17), where the batch
and length are one of its cases. Target (issue 22): under 60 s on 2 cores. Nothing is asserted.
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
TRUTH = ROOT / "assets" / "ground_truth" / "h200_hf_loop.json"

SCRIPT = '''\
import json, sys
import torch
from transformers import AutoConfig, AutoModelForCausalLM

batch, seq, host = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4] == "host"
spec = json.load(open(sys.argv[3]))
config = AutoConfig.for_model(spec.pop("model_type"), **spec)
config.use_cache = False
torch.manual_seed(0)
if host:
    model = AutoModelForCausalLM.from_config(config).cuda()
else:
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
for step in range(1000):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"step {step} loss {loss.item():.4f} max allocated "
          f"{torch.cuda.max_memory_allocated():,} B")
'''


def _truth(batch: int, seq: int) -> dict | None:
    try:
        cases = json.loads(TRUTH.read_text())["peak"]
    except (OSError, ValueError, KeyError):
        return None
    return next((c for c in cases if c.get("model") == "gpt2" and c.get("combo") == "bf16"
                 and c.get("batch") == batch and c.get("seq") == seq), None)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--host", action="store_true",
                    help="build the model on the CPU and move it with .cuda()")
    ap.add_argument("--keep", help="write the script here instead of a temporary folder")
    args = ap.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="memlab-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "train_gpt2_small.py"
    script.write_text(SCRIPT)
    config = json.loads((ROOT / "assets" / "models" / "gpt2.json").read_text())
    config_path = folder / "gpt2.json"
    config_path.write_text(json.dumps({k: v for k, v in config.items()
                                       if not k.startswith("_") and k != "architectures"}))
    cmd = [sys.executable, "-m", "lab", "profile", "--mode", "sim", "--steps", str(args.steps),
           "--json", "--quiet", "--", "python", str(script), str(args.batch), str(args.seq),
           str(config_path), "host" if args.host else "device"]
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
          f"in {r['peak']['phase']!r} (torch {r['torch_version']}, transformers "
          f"{r['transformers_version']})")
    truth = _truth(args.batch, args.seq)
    if truth is not None:
        da = a["peak_allocated_bytes"] / truth["max_allocated"] - 1
        dr = a["peak_reserved_bytes"] / truth["max_reserved"] - 1
        print(f"the H200 for this loop ({TRUTH.relative_to(ROOT)}, torch {truth['torch']}, "
              f"transformers {truth['transformers']}): max allocated {truth['max_allocated']:,} B "
              f"({da:+.3%}), max reserved {truth['max_reserved']:,} B ({dr:+.3%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
