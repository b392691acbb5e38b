"""Ground truth on a real GPU, written independently of the lab: the plain Hugging Face loop.

The simulator, the allocator model and `memlab fit` are judged on cases they have not seen. This
script measures those cases with the loop a user writes — no lab code, no tracker:

    model = AutoModelForCausalLM.from_config(config)        # random weights, assets/models/*.json
    for step in range(2):
        with autocast (bf16) or nothing:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)   # AdamW defaults

and records `torch.cuda.max_memory_allocated()` / `max_memory_reserved()` (peak cases) or the
largest batch that runs under `torch.cuda.set_per_process_memory_fraction(cap / total)` (fit
cases). Every case runs in a fresh process (a clean caching allocator), several at once.

    python bench/h200_ground_truth.py --out DIR [--only peak|fit]

writes DIR/ground_truth.json and prints a table. Needs CUDA (torch >= 2.4, transformers >= 4.45).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODELS = Path(__file__).resolve().parents[1] / "assets" / "models"
GiB = 2**30

# (model, combo, batch, seq, GiB it may need): unconstrained peaks; the estimate only schedules
# cases so that those running at once fit on one 141 GB GPU
PEAK_CASES = [
    ("llama-3.2-1b", "fp32", 4, 1024, 48), ("llama-3.2-1b", "bf16", 4, 1024, 40),
    ("llama-3.2-1b", "fp32+ckpt", 4, 1024, 32), ("llama-3.2-1b", "bf16+ckpt", 4, 1024, 32),
    ("smollm2-135m", "fp32", 8, 1024, 24), ("smollm2-135m", "bf16", 8, 1024, 20),
    ("smollm2-360m", "bf16+ckpt", 8, 1024, 16),
    ("qwen2.5-0.5b", "fp32", 4, 1024, 40), ("qwen2.5-0.5b", "bf16+ckpt", 4, 1024, 24),
    ("gpt2", "fp32", 8, 1024, 20), ("gpt2", "bf16", 8, 1024, 16),
    ("phi-1.5", "bf16", 2, 1024, 40), ("gemma-2b", "bf16+ckpt", 1, 1024, 56),
]
# (model, combo, seq, cap in GiB): the largest batch that runs two steps under the cap
FIT_CASES = [
    ("gpt2", "fp32", 1024, 16), ("gpt2", "bf16+ckpt", 1024, 16),
    ("smollm2-360m", "fp32", 1024, 16), ("smollm2-360m", "bf16+ckpt", 1024, 16),
    ("qwen2.5-0.5b", "fp32", 1024, 24), ("qwen2.5-0.5b", "bf16", 1024, 24),
    ("llama-3.2-1b", "fp32", 1024, 40), ("llama-3.2-1b", "bf16+ckpt", 1024, 40),
]
BUDGET_GIB = 128  # what the cases running at once may reserve together


class GiBSemaphore:
    """Admit a case when its GiB fit in what the running cases leave of the budget."""

    def __init__(self, budget: int):
        import threading

        self.free, self.cond = budget, threading.Condition()

    def __call__(self, gib: int, fn, *args):
        with self.cond:
            self.cond.wait_for(lambda: self.free >= gib)
            self.free -= gib
        try:
            return fn(*args)
        finally:
            with self.cond:
                self.free += gib
                self.cond.notify_all()


# ---- one case, in its own process ---------------------------------------------------------------
def run_case(spec: dict) -> dict:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg_d = json.loads((MODELS / f"{spec['model']}.json").read_text())
    cfg = AutoConfig.for_model(cfg_d.pop("model_type"), **cfg_d)
    cfg.use_cache = False
    total = torch.cuda.get_device_properties(0).total_memory
    if spec.get("cap_gib"):
        torch.cuda.set_per_process_memory_fraction(min(1.0, spec["cap_gib"] * GiB / total))
    torch.manual_seed(0)
    combo = spec["combo"].split("+")
    out = {**spec, "status": "ok"}
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
    out.update(max_allocated=torch.cuda.max_memory_allocated(),
               max_reserved=torch.cuda.max_memory_reserved(),
               params=sum(p.numel() for p in model.parameters()) if out["status"] == "ok" else None,
               torch=torch.__version__, gpu=torch.cuda.get_device_name(0), total_bytes=total)
    import transformers

    out["transformers"] = transformers.__version__
    return out


def spawn(spec: dict, timeout: float = 300) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        p = subprocess.run([sys.executable, __file__, "--case", json.dumps(spec)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**spec, "status": "timeout"}
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        return {**spec, "status": "error", "error": (p.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(lines[-1])


# ---- fit: largest batch under a cap -------------------------------------------------------------
def fit(model: str, combo: str, seq: int, cap_gib: int, gate: GiBSemaphore) -> dict:
    """Batches 1 and 2 give a line (peak grows ~linearly with the batch); the batches around its
    guess run side by side; bisection finishes if the line was off. Each probe: a fresh process
    capped at `cap_gib` with set_per_process_memory_fraction."""
    probes: dict[int, dict] = {}

    def run_many(batches: list[int]) -> None:
        todo = [b for b in dict.fromkeys(batches) if b not in probes and b >= 1]
        with ThreadPoolExecutor(max_workers=max(1, len(todo))) as pool:
            specs = [{"model": model, "combo": combo, "batch": b, "seq": seq, "cap_gib": cap_gib}
                     for b in todo]
            for b, r in zip(todo, pool.map(lambda sp: gate(cap_gib, spawn, sp), specs)):
                probes[b] = r

    ok = lambda b: probes[b]["status"] == "ok"  # noqa: E731
    run_many([1, 2])
    good, bad = 0, None
    if ok(1):
        good = 1
        if ok(2):
            good = 2
            slope = probes[2]["max_allocated"] - probes[1]["max_allocated"]
            guess = min(4096, 2 + int((cap_gib * GiB - probes[2]["max_allocated"]) // max(slope, 1)))
            run_many([guess - 1, guess, guess + 1, guess + 2])
        else:
            bad = 2
    while True:
        oks = [b for b in probes if ok(b)]
        ooms = [b for b in probes if not ok(b)]
        good = max(oks, default=0)
        bad = min([b for b in ooms if b > good], default=None)
        if bad is not None and bad - good <= 1:
            break
        if bad is None:  # everything tried fits: double
            if good >= 4096:
                break
            run_many([good * 2])
        else:
            run_many([(good + bad) // 2])
    errors = [p for p in probes.values() if p["status"] not in ("ok", "oom")]
    return {"model": model, "combo": combo, "seq": seq, "cap_gib": cap_gib, "largest_batch": good,
            "first_oom_batch": bad, "probes": [probes[k] for k in sorted(probes)],
            "errors": errors}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--only", choices=["peak", "fit"])
    ap.add_argument("--case", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.case:
        print(json.dumps(run_case(json.loads(args.case))))
        return 0
    t0 = time.time()
    gate = GiBSemaphore(BUDGET_GIB)
    peak_specs = [({"model": m, "combo": c, "batch": b, "seq": s}, gib) for m, c, b, s, gib in PEAK_CASES]
    result: dict = {"peak": [], "fit": []}
    with ThreadPoolExecutor(max_workers=len(PEAK_CASES) + len(FIT_CASES)) as pool:
        peaks = [pool.submit(gate, gib, spawn, spec) for spec, gib in peak_specs] \
            if args.only != "fit" else []
        fits = [pool.submit(fit, *case, gate) for case in FIT_CASES] if args.only != "peak" else []
        result["peak"] = [f.result() for f in peaks]
        result["fit"] = [f.result() for f in fits]
    for r in result["peak"]:
        print(f"peak {r['model']:<14} {r['combo']:<10} b{r['batch']:<3} s{r['seq']:<5} "
              f"{r['status']:<6} alloc {r.get('max_allocated', 0) / 1e9:8.3f} GB  "
              f"reserved {r.get('max_reserved', 0) / 1e9:8.3f} GB {r.get('error', '')[:80]}")
    for r in result["fit"]:
        print(f"fit  {r['model']:<14} {r['combo']:<10} s{r['seq']:<5} cap {r['cap_gib']} GiB: "
              f"largest batch {r['largest_batch']} (first OOM {r['first_oom_batch']}) "
              f"{len(r['probes'])} probes {'ERRORS' if r['errors'] else ''}")
    result["seconds"] = round(time.time() - t0, 1)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "ground_truth.json").write_text(json.dumps(result, indent=1))
    print(f"{result['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
