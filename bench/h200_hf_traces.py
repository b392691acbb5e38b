"""The caching allocator's own trace of the plain Hugging Face loop, where sim and the H200 differ.

bench/sim_vs_ground_truth.py finds sim's predicted max allocated within 0.2 % of the H200 on
every case of assets/ground_truth/h200_hf_loop.json, but max reserved off by -7.1 %
(qwen2.5-0.5b fp32, batch 4) and +4.1 % (gemma-2b bf16 + ckpt, batch 1), and the allocator
model says llama-3.2-1b bf16 + ckpt under a 40 GiB cap runs out of memory at batch 12 while 13
fits (the H200's search never tried 10-12). This script records, for those cases, what the
caching allocator did (`torch.cuda.memory._record_memory_history`, no stacks) so the model can be
replayed against it request by request - with the GPU's segment addresses and with synthetic
ones - and prints each case's status and peaks. Like bench/h200_ground_truth.py it uses no lab
code: the loop is the one a user writes.

    python bench/h200_hf_traces.py --out DIR        (CUDA; about 2 minutes on an H200)

writes DIR/hf_traces.jsonl.gz (one JSON object per case: status, memory_stats peaks, NVML used,
the allocator trace as [action, addr, size, stream] with action names in `actions`) and prints
a table.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "assets" / "models"
GiB = 2**30
# (model, combo, batch, seq, cap GiB or None)
CASES = [
    ("qwen2.5-0.5b", "fp32", 4, 1024, None),
    ("gemma-2b", "bf16+ckpt", 1, 1024, None),
    ("smollm2-360m", "fp32", 2, 1024, 16),
    ("smollm2-135m", "fp32", 8, 1024, None),
    ("llama-3.2-1b", "bf16+ckpt", 10, 1024, 40),
    ("llama-3.2-1b", "bf16+ckpt", 11, 1024, 40),
    ("llama-3.2-1b", "bf16+ckpt", 12, 1024, 40),
    ("qwen2.5-0.5b", "fp32", 2, 1024, 24),
]


def nvml_used() -> int | None:
    """What NVML says this process holds on its GPU (context + libraries + reserved); cases
    run two at once, so the device-wide number would count the others too."""
    try:
        import pynvml

        pynvml.nvmlInit()
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                if proc.pid == os.getpid() and proc.usedGpuMemory:
                    return int(proc.usedGpuMemory)
    except Exception:  # noqa: BLE001  (no pynvml, no permission inside a container)
        pass
    return None


def run_case(spec: dict) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    d = json.loads((MODELS / f"{spec['model']}.json").read_text())
    cfg = AutoConfig.for_model(d.pop("model_type"), **d)
    cfg.use_cache = False
    total = torch.cuda.get_device_properties(0).total_memory
    if spec.get("cap_gib"):
        torch.cuda.set_per_process_memory_fraction(min(1.0, spec["cap_gib"] * GiB / total))
    torch.manual_seed(0)
    combo = spec["combo"].split("+")
    out = {**spec, "status": "ok"}
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                             max_entries=2_000_000)
    try:
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg)
        model.train()
        if "ckpt" in combo:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), device="cuda")
        amp = torch.autocast("cuda", dtype=torch.bfloat16) if "bf16" in combo else None
        for _ in range(2):
            if amp:
                with amp:
                    loss = model(input_ids=ids, labels=ids).loss
            else:
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    except torch.OutOfMemoryError as e:
        out["status"] = "oom"
        out["error"] = str(e).splitlines()[0][:300]
    out["nvml_used"] = nvml_used()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    acts: dict[str, int] = {}
    out["trace"] = [[acts.setdefault(t["action"], len(acts)), t.get("addr", 0), t.get("size", 0),
                     t.get("stream", 0)] for t in snap["device_traces"][0]]
    out["actions"] = list(acts)
    ms = torch.cuda.memory_stats()
    out.update(max_allocated=ms["allocated_bytes.all.peak"], max_reserved=ms["reserved_bytes.all.peak"],
               reserved_now=ms["reserved_bytes.all.current"], retries=ms["num_alloc_retries"],
               ooms=ms["num_ooms"], torch=torch.__version__, total_bytes=total,
               gpu=torch.cuda.get_device_name(0))
    return out


def spawn(spec: dict, tmp: Path, timeout: float = 200) -> dict:
    f = tmp / f"{abs(hash(json.dumps(spec, sort_keys=True)))}.json"
    try:
        p = subprocess.run([sys.executable, __file__, "--case", json.dumps(spec), "--out", str(f)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**spec, "status": "timeout"}
    if p.returncode or not f.is_file():
        return {**spec, "status": "error", "error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(f.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        Path(args.out).write_text(json.dumps(run_case(json.loads(args.case)), separators=(",", ":")))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".parts"
    tmp.mkdir(exist_ok=True)
    t0 = time.time()
    specs = [{"model": m, "combo": c, "batch": b, "seq": s, "cap_gib": cap} for m, c, b, s, cap in CASES]
    with ThreadPoolExecutor(2) as pool:  # < 60 GB each: two at once fit on one H200
        results = list(pool.map(lambda sp: spawn(sp, tmp), specs))
    with gzip.open(out / "hf_traces.jsonl.gz", "wt") as f:
        for r in results:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    for p in tmp.iterdir():
        p.unlink()
    tmp.rmdir()
    for r in results:
        print(f"{r['model']:<14} {r['combo']:<10} b{r['batch']:<3} cap {r.get('cap_gib')} "
              f"{r['status']:<6} alloc {r.get('max_allocated', 0) / 1e9:8.3f} GB reserved "
              f"{r.get('max_reserved', 0) / 1e9:8.3f} GB nvml {(r.get('nvml_used') or 0) / 1e9:7.3f} GB "
              f"events {len(r.get('trace', []))} {r.get('error', '')[:80]}")
    print(f"{time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
