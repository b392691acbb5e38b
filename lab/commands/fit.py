"""`memlab fit WORKLOAD --gpu-memory 16GiB`: the largest batch that fits, per combination.

    memlab fit mlp --gpu-memory 16GiB --combo baseline --combo bf16+ckpt --combo ckpt+accum4
    memlab fit linear --gpu-memory 24GB --json
    memlab fit qwen2-1.5b --gpus 8 --gpu-memory 80GB --combo ddp --combo fsdp   (batch per GPU)

Predicted by simulation (exact tensor bytes, a few sim runs per combination in this process),
then confirmed by a real run on CUDA when a GPU is visible (--no-confirm skips it): the margin
left is the GPU size minus the predicted peak, and on CUDA minus the allocator's peak reserved.
"""

from __future__ import annotations

import json
import sys

from lab.commands import UsageError, gpu_memory_arg
from lab.commands.compare import add_workload_args, list_workloads, resolve, workload_parser

DEFAULT_COMBOS = ["baseline", "bf16", "ckpt", "bf16+ckpt"]


def add_parser(sub) -> None:
    p = workload_parser(sub, "fit", "the largest batch that fits a GPU size, per combination")
    add_workload_args(p)
    p.add_argument("--gpu-memory", metavar="SIZE", help="the GPU size, e.g. 16GiB, 24GB, 80GB")
    p.add_argument("--no-confirm", action="store_true",
                   help="do not confirm on CUDA even when a GPU is visible")
    p.add_argument("--max-batch", type=int, default=1 << 16, metavar="N",
                   help="stop searching above this micro-batch (default 65536)")
    p.set_defaults(func=main)


def main(args) -> int:
    if args.list:
        print(list_workloads())
        return 0
    from lab.report.units import SIZE_HELP

    if not args.gpu_memory:
        raise UsageError(f"--gpu-memory is required: {SIZE_HELP}")
    capacity = gpu_memory_arg(args.gpu_memory)
    if args.max_batch < 1:
        raise UsageError("--max-batch must be at least 1")
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    args.mode = "sim"  # sizes default to the seed scale: a fit is about a real GPU
    w, sizes, combos, scale = resolve(args, DEFAULT_COMBOS, check_batch=False)

    from lab.measure.device import cuda_available
    from lab.playground.fit import runner_probe
    from lab.workloads.fit import confirm, search, sim_probe

    confirm_on_cuda = not args.no_confirm and cuda_available()
    unconfirmed = None
    if confirm_on_cuda and args.gpus > 1:
        from lab.commands.compare import cuda_gpus

        if cuda_gpus() < args.gpus:  # the prediction stands; say why it is not confirmed
            confirm_on_cuda = False
            unconfirmed = (f"not confirmed on CUDA: --gpus {args.gpus} and this machine has "
                           f"{cuda_gpus()} GPU(s)")
    runner = None
    if confirm_on_cuda:
        from lab.runner.client import default_runner

        runner = default_runner(gpus=args.gpus) if args.gpus > 1 else default_runner()
    results = []
    for cfg in combos:
        if not args.json:
            print(f"▶ {w.name} · {cfg.label}: predicting by simulation …", file=sys.stderr,
                  flush=True)
        res = search(sim_probe(w.name, sizes, cfg, scale, gpus=args.gpus), capacity, cfg,
                     max_micro=args.max_batch)
        if runner is not None:
            if not args.json:
                print(f"    confirming batch {res.batch} on CUDA …", file=sys.stderr, flush=True)
            res = confirm(res, runner_probe(runner, w.name, sizes, cfg, "cuda", scale, capacity,
                                            args.timeout, args.gpus), cfg)
        results.append(res)
    if unconfirmed:
        note = unconfirmed
    elif not confirm_on_cuda:
        note = ("not confirmed on CUDA (--no-confirm)" if args.no_confirm else
                "not confirmed: no CUDA GPU here; the real allocator adds 512-byte rounding, "
                "the cuBLAS workspace and fragmentation on top of these predictions")
    else:
        note = ("confirmed on CUDA with the GPU capped at --gpu-memory "
                "(torch.cuda.set_per_process_memory_fraction; the CUDA context is outside it)")
    if args.json:
        print(json.dumps({"schema": 1, "kind": "fit", "workload": w.name, "sizes": sizes,
                          "capacity_bytes": capacity, "gpus": args.gpus,
                          "confirmed_on_cuda": confirm_on_cuda,
                          "note": note, "results": [r.to_dict() for r in results]}, indent=1))
    else:
        from types import SimpleNamespace

        from lab.commands.run import installed_versions
        from lab.playground.text import fit_table
        from lab.report import capacity as cap_text, provenance

        sz = ", ".join(f"{k}={v}" for k, v in sizes.items() if k != "batch")
        sim = provenance(SimpleNamespace(mode="sim", scale=scale, device=None,
                                         torch_version=installed_versions()[0] or ""))
        per = (f" per GPU · ddp/zero1/fsdp on {args.gpus} GPUs, batch per GPU"
               if args.gpus > 1 else "")
        print(f"\n{w.name} in {cap_text(capacity)}{per} · {sz}")
        print(f"predicted peaks: {sim}" + ("; CUDA columns: your GPU" if confirm_on_cuda else "")
              + "\n")
        print(fit_table(results))
        print(f"\n{note}")
    return 1 if any(r.status == "error" for r in results) else 0
