"""Ground truth for the simulator and the allocator model, recorded on a CUDA GPU (issue 10).

    python bench/probe_cuda.py --out DIR            on the H200 (torch 2.11, transformers 5.x)
    python bench/probe_cuda.py --out DIR --cpu      here: the same code paths, tiny, on the CPU

Writes at most 5 files under DIR (each job runs in its own process: a fresh CUDA context, a
clean caching allocator, no cuBLAS handle yet):
  env.json          versions, device, SDPA / BLAS / allocator settings, the ops that have a
                    CUDA (and CPU) autocast kernel, NVML-used bytes before/after CUDA init
  sdpa.json         for dtype x shape x mask: the backend `_fused_sdp_choice` picks, the ops
                    forward and backward run, their outputs and the allocator bytes around them
  ops.jsonl.gz      per aten op of small workloads (2-layer GPT-2/Qwen2 at full width; fp32,
                    bf16, fp16+GradScaler, checkpointing, eval modes; Linear on two threads):
                    name, thread, in-backward, input/output dtypes+shapes, allocated before /
                    after / peak during the op (the hidden workspaces and temporaries)
  traces.jsonl.gz   seed-scale lesson variants (and fit boundaries under a 16 GiB cap): the
                    tensor tracker's events and the allocator's own trace (alloc / free /
                    segment events), memory_stats, the final segments
  log.txt           what each job printed
Expected time on an H200: about 2-3 minutes (jobs run four at a time); jobs that have not
started after 200 s are skipped and named in log.txt.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEADLINE_S = 200
GIB16 = 16 * 2**30


# ---- helpers ------------------------------------------------------------------------------
def _dev(cpu: bool):
    import torch

    return torch.device("cpu" if cpu else "cuda", 0 if not cpu else None)


def _alloc(cpu: bool) -> int:
    import torch

    return 0 if cpu else torch.cuda.memory_allocated()


def _meta(t) -> list:
    return [str(t.dtype).replace("torch.", ""), list(t.shape)]


class OpLog:
    """A TorchDispatchMode recording every aten op with the allocator bytes around it."""

    def __new__(cls, cpu: bool, sink: list):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten

        class _OpLog(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                flat_in = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
                in_st = set()
                for a in flat_in:
                    try:
                        in_st.add(a.untyped_storage()._cdata)
                    except Exception:
                        pass
                if not cpu:
                    torch.cuda.reset_peak_memory_stats()
                before = _alloc(cpu)
                out = func(*args, **kwargs)
                after = _alloc(cpu)
                peak = before if cpu else torch.cuda.max_memory_allocated()
                outs = []
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        try:
                            st = t.untyped_storage()
                            outs.append(_meta(t) + [st.nbytes(), st._cdata not in in_st])
                        except Exception:
                            outs.append(_meta(t) + [0, False])
                tid = threading.get_ident()
                thread = 0 if tid == threading.main_thread().ident else tid % 100003
                sink.append([str(func), thread, torch._C._current_graph_task_id() != -1,
                             [_meta(a) for a in flat_in], outs, before, after, peak])
                return out

        return _OpLog()


def _tiny_run(cpu: bool):
    """A Session without tracker: experiments' phase() calls work, nothing is measured."""
    from lab.measure.session import Session

    return Session.for_mode("cpu" if cpu else "cuda")


# ---- jobs ---------------------------------------------------------------------------------
def job_env(cpu: bool) -> dict:
    import torch

    d: dict = {"torch": torch.__version__, "python": sys.version.split()[0]}
    try:
        import transformers

        d["transformers"] = transformers.__version__
    except Exception as e:  # noqa: BLE001
        d["transformers"] = repr(e)
    d["env"] = {k: os.environ.get(k) for k in ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE",
                                              "PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUBLASLT_UNIFIED_WORKSPACE",
                                              "TORCH_CUDNN_SDPA_DEPRIORITIZED")}
    names = torch._C._dispatch_get_all_op_names()
    for key in ("AutocastCUDA", "AutocastCPU"):
        d[key] = sorted(n for n in names if torch._C._dispatch_has_kernel_for_dispatch_key(n, key))
    if cpu:
        return d
    used = getattr(torch.cuda, "device_memory_used", None)
    d["nvml_before_init"] = used(0) if used else None
    torch.cuda.init()
    p = torch.cuda.get_device_properties(0)
    d["device"] = {"name": p.name, "major": p.major, "minor": p.minor, "total_memory": p.total_memory,
                   "mem_get_info": list(torch.cuda.mem_get_info(0))}
    d["cuda"] = torch.version.cuda
    d["cudnn"] = torch.backends.cudnn.version()
    d["sdp_enabled"] = {k: getattr(torch.backends.cuda, k)() for k in
                        ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled",
                         "cudnn_sdp_enabled") if hasattr(torch.backends.cuda, k)}
    for k in ("_get_sdp_priority_order",):
        if hasattr(torch._C, k):
            d["sdp_priority_order"] = [str(x) for x in getattr(torch._C, k)()]
    try:
        d["preferred_blas"] = str(torch.backends.cuda.preferred_blas_library())
    except Exception as e:  # noqa: BLE001
        d["preferred_blas"] = repr(e)
    d["nvml_after_init"] = used(0) if used else None
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()
    d["nvml_after_matmul"] = used(0) if used else None
    d["allocated_after_matmul"] = torch.cuda.memory_allocated()
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
    torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().item()
    d["nvml_after_sdpa"] = used(0) if used else None
    d["allocator_settings"] = torch.cuda.memory._snapshot().get("allocator_settings")
    return d


def job_sdpa(cpu: bool) -> list:
    import torch
    import torch.nn.functional as F

    dev = _dev(cpu)
    shapes = [((8, 12, 1024, 64), 12), ((2, 12, 256, 128), 2), ((2, 4, 100, 64), 4),
              ((2, 4, 1000, 80), 4), ((1, 4, 512, 256), 4), ((2, 8, 333, 96), 8)]
    if cpu:  # the code paths only: small shapes
        shapes = [((2, 4, 64, 32), 4), ((2, 4, 40, 16), 2)]
    dtypes = [torch.float32, torch.bfloat16, torch.float16]
    masks = ["causal", "none", "bool", "float"]
    rows = []
    for (b, h, s, d), hkv in shapes:
        for dt in dtypes:
            for m in masks:
                for grad in (True, False):
                    q = torch.randn(b, h, s, d, device=dev, dtype=dt, requires_grad=grad)
                    k = torch.randn(b, hkv, s, d, device=dev, dtype=dt, requires_grad=grad)
                    v = torch.randn(b, hkv, s, d, device=dev, dtype=dt, requires_grad=grad)
                    mask = None
                    if m == "bool":
                        mask = torch.ones(s, s, device=dev, dtype=torch.bool).tril()
                    elif m == "float":
                        mask = torch.zeros(b, 1, s, s, device=dev, dtype=dt)
                    kw = dict(attn_mask=mask, is_causal=m == "causal", enable_gqa=hkv != h)
                    row = {"shape": [b, h, s, d], "kv_heads": hkv, "dtype": str(dt), "mask": m,
                           "grad": grad}
                    try:
                        row["choice"] = int(torch._fused_sdp_choice(
                            q, k, v, mask, 0.0, m == "causal", scale=None, enable_gqa=hkv != h))
                    except Exception as e:  # noqa: BLE001
                        row["choice"] = repr(e)[:200]
                    fwd: list = []
                    try:
                        with OpLog(cpu, fwd):
                            o = F.scaled_dot_product_attention(q, k, v, **kw)
                        row["forward"] = fwd
                        if grad:
                            bwd: list = []
                            g = torch.ones_like(o)
                            with OpLog(cpu, bwd):
                                o.backward(g)
                            row["backward"] = bwd
                    except Exception as e:  # noqa: BLE001
                        row["error"] = repr(e)[:300]
                    rows.append(row)
                    del q, k, v, mask
                    if not cpu:
                        torch.cuda.empty_cache()
    return rows


def _layout(family: str, cpu: bool):
    from lab.workloads.registry import Layout

    if family == "gpt2":
        if cpu:
            return Layout("gpt2-probe", "gpt2", 1000, 2, 4, 128, 256)
        return Layout("gpt2-2l", "gpt2", 50257, 2, 12, 768, 1024)
    if cpu:
        return Layout("qwen2-probe", "qwen2", 1000, 2, 4, 128, 256, n_kv_head=2, d_ff=256)
    return Layout("qwen2-2l", "qwen2", 151936, 2, 12, 1536, 4096, n_kv_head=2, d_ff=8960)


def job_ops(cpu: bool, name: str) -> list:
    """One small workload per job, op by op."""
    import torch

    from lab.workloads import TrainConfig
    from lab.workloads.data import random_batch
    from lab.workloads.models import build_model
    from lab.workloads.train import enable_checkpointing, eval_step, make_optimizer, train_step

    dev, sink, run = _dev(cpu), [], _tiny_run(cpu)
    torch.manual_seed(0)
    if name == "linear_threads":  # which thread / which op makes which workspace
        lin = torch.nn.Linear(1000, 5000, device=dev)
        x = torch.randn(500, 1000, device=dev)
        with OpLog(cpu, sink):
            y = lin(x)  # addmm with a bias: cuBLASLt on the main thread
            y.sum().backward()  # mm on the autograd thread
            z = x @ lin.weight.t()  # plain mm on the main thread
            t = threading.Thread(target=lambda: (x @ lin.weight.t()).sum().item())
            t.start()
            t.join()
            w = lin(x.requires_grad_())  # addmm again: workspaces already made
            w.sum().backward()
        del y, z, w
        return sink
    family, _, mode = name.partition("_")  # e.g. gpt2_bf16, qwen2_fp32, gpt2_eval-nograd-bf16
    lay = _layout(family, cpu)
    model = build_model(lay, dev)
    b, s = (2, 64) if cpu else ((2, 512) if family == "gpt2" else (2, 256))
    x, y = random_batch(b, s, lay.vocab_size, 0, dev)
    if mode.startswith("eval"):
        _, grad_mode, prec = mode.split("-")
        model.eval()
        with OpLog(cpu, sink):
            loss = eval_step(run, model, x, y, TrainConfig(precision=prec), 0,
                             grad_mode={"nograd": "no_grad", "infer": "inference_mode",
                                        "grad": "grad"}[grad_mode])
            del loss
        return sink
    prec, _, ckpt = mode.partition("-")
    cfg = TrainConfig(precision=prec, checkpointing=ckpt or "none")
    enable_checkpointing(model, cfg.checkpointing)
    opt = make_optimizer(model, cfg)
    scaler = torch.amp.GradScaler("cuda") if prec == "fp16" and not cpu else None
    with OpLog(cpu, sink):
        train_step(run, model, opt, scaler, x, y, cfg, 0)
    return sink


OPS_JOBS = ["linear_threads", "gpt2_fp32", "gpt2_bf16", "gpt2_fp16", "gpt2_bf16-blocks",
            "gpt2_fp32-hf", "qwen2_fp32", "qwen2_bf16", "gpt2_eval-nograd-bf16",
            "gpt2_eval-infer-fp32", "gpt2_eval-grad-fp32"]

# (lesson key, variant, param overrides): seed scale, as `memlab run` would, plus fit boundaries
TRACE_JOBS = [("08", "baseline", {}), ("08", "bf16", {}), ("18", "bf16", {}),
              ("18", "bf16_checkpointing", {}), ("17", "baseline", {}),
              ("17", "expandable_segments", {}), ("01", "baseline", {}), ("09", "checkpoint_blocks", {}),
              ("10", "accumulate", {}), ("08", "fp16", {}), ("07", "no_grad", {}), ("02", "baseline", {}),
              ("18", "baseline", {"batch": 8}), ("18", "baseline", {"batch": 9}),
              ("18", "bf16_checkpointing", {"batch": 20}), ("18", "bf16_checkpointing", {"batch": 21}),
              ("03", "small_batch", {})]


def job_trace(cpu: bool, key: str, variant: str, overrides: dict) -> dict:
    """One lesson variant, tracked, with the allocator's own history (no stacks: fast)."""
    import torch

    from lab.course.curriculum import load_course
    from lab.measure.measure import is_oom
    from lab.measure.session import Session
    from lab.measure.tracker import TensorTracker
    from lab.runner.worker import load_experiment

    lesson = load_course().find(key)
    params = {**lesson.params("small" if cpu else "seed"), **overrides}
    fn = getattr(load_experiment(str(lesson.experiment_path)), variant)
    dev = _dev(cpu)
    if params.get("gpu_memory") and not cpu:
        from lab.measure.device import set_virtual_gpu

        set_virtual_gpu(int(params["gpu_memory"]))
    torch.manual_seed(0)
    tracker = TensorTracker(device_type=None if cpu else "cuda")
    stats = None if cpu else (lambda: {k: v for k, v in torch.cuda.memory_stats().items()
                                       if k.endswith(".all.current") or k.endswith(".all.peak")
                                       or k.startswith("num_")})
    session = Session.for_mode("cpu" if cpu else "cuda", params, tracker)
    if not cpu:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                 max_entries=2_000_000)
    status, error = "ok", None
    try:
        with tracker:
            fn(session)
    except Exception as e:  # noqa: BLE001
        status, error = ("oom" if is_oom(e) else "error"), str(e)[:600]
        tracker.close()
    trace = tracker.close()
    phase_ix = {}
    events = [[0 if e.kind == "alloc" else 1, e.sid, e.nbytes, e.ptr, phase_ix.setdefault(e.phase, len(phase_ix))]
              for e in trace.events]
    out = {"lesson": lesson.id, "variant": variant, "overrides": overrides, "status": status,
           "error": error, "phases": list(phase_ix), "events": events,
           "phase_cuda": [[r.name, r.cuda] for r in session.phases]}
    if not cpu:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        acts = {}
        out["alloc_trace"] = [[acts.setdefault(t["action"], len(acts)), t.get("addr", 0),
                               t.get("size", 0), t.get("stream", 0)] for t in snap["device_traces"][0]]
        out["alloc_actions"] = list(acts)
        out["segments"] = [[s["address"], s["total_size"], s["segment_type"], s.get("is_expandable"),
                            [[b["size"], b["state"]] for b in s["blocks"]]] for s in snap["segments"]]
        out["memory_stats"] = stats()
    return out


# ---- driver -------------------------------------------------------------------------------
def run_job(spec: list, cpu: bool, tmp: Path) -> None:
    kind = spec[0]
    if kind == "env":
        res = job_env(cpu)
    elif kind == "sdpa":
        res = job_sdpa(cpu)
    elif kind == "ops":
        res = {"workload": spec[1], "ops": job_ops(cpu, spec[1])}
    else:
        res = job_trace(cpu, spec[1], spec[2], spec[3])
    (tmp / "result.json").write_text(json.dumps(res, separators=(",", ":")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cpu", action="store_true", help="tiny sizes on the CPU (checks the code paths)")
    ap.add_argument("--job", help=argparse.SUPPRESS)  # internal: one job, as JSON
    ap.add_argument("--jobs", type=int, default=4)
    args = ap.parse_args()
    out = Path(args.out)
    if args.job:
        run_job(json.loads(args.job), args.cpu, out)
        return
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".parts"
    tmp.mkdir(exist_ok=True)
    ops = [["ops", w] for w in OPS_JOBS]
    traces = [["trace", k, v, o] for k, v, o in TRACE_JOBS]
    # the most wanted first: jobs that have not started by the deadline are skipped
    specs = [["env"]] + traces[:4] + ops[:3] + [["sdpa"]] + traces[4:8] + ops[3:] + traces[8:]
    if args.cpu:  # lesson 03 at small scale is slow on a laptop and adds nothing here
        specs = [s for s in specs if s[:2] != ["trace", "03"] and not (s[0] == "trace" and s[3])]
    t0 = time.time()
    log: list[str] = []
    results: dict[int, object] = {}

    def one(i: int) -> None:
        spec = specs[i]
        if time.time() - t0 > DEADLINE_S and not args.cpu:
            log.append(f"SKIPPED (deadline) {spec}")
            return
        d = tmp / str(i)
        d.mkdir(exist_ok=True)
        cmd = [sys.executable, __file__, "--out", str(d), "--job", json.dumps(spec)]
        if args.cpu:
            cmd.append("--cpu")
        t = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        log.append(f"=== {spec} rc={p.returncode} {time.time() - t:.1f}s\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        f = d / "result.json"
        if f.is_file():
            results[i] = json.loads(f.read_text())

    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, range(len(specs))))
    by_kind = lambda k: [results[i] for i in sorted(results) if specs[i][0] == k]  # noqa: E731
    (out / "env.json").write_text(json.dumps(by_kind("env")[0] if by_kind("env") else {}, indent=1))
    (out / "sdpa.json").write_text(json.dumps(by_kind("sdpa")[0] if by_kind("sdpa") else [], separators=(",", ":")))
    for kind, name in (("ops", "ops.jsonl.gz"), ("trace", "traces.jsonl.gz")):
        with gzip.open(out / name, "wt") as f:
            for r in by_kind(kind):
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    log.append(f"total {time.time() - t0:.1f}s")
    (out / "log.txt").write_text("\n".join(log))
    for p in sorted(tmp.rglob("*"), reverse=True):
        p.rmdir() if p.is_dir() else p.unlink()
    tmp.rmdir()
    print(f"probe done in {time.time() - t0:.1f}s: " + ", ".join(sorted(x.name for x in out.iterdir())))


if __name__ == "__main__":
    main()
