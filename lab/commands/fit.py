"""`memlab fit`: the largest batch that fits a GPU, per combination, without over-promising.

    memlab fit gpt2-small --gpu-memory 16GiB --combo baseline --combo bf16+ckpt
    memlab fit mlp --gpu-memory 16GiB --combo baseline --combo bf16+ckpt --combo ckpt+accum4
    memlab fit linear --gpu-memory 24GB --json
    memlab fit qwen2-1.5b --gpus 8 --gpu-memory 80GB --combo ddp --combo fsdp   (batch per GPU)
    memlab fit --model llama-3.2-1b --gpu a100-40gb --combo bf16+ckpt
    memlab fit --config my/config.json --gpu t4 --seq 2048 --json

A batch fits when PyTorch's caching allocator would not run out of memory: the allocator model
(lab.measure.sim.allocator.model) replays the simulated training step under the limit, with the
allocator's own release-and-retry, and decides (lab/workloads/fit.py, fit_sim.py). The limit:
`--gpu-memory SIZE` is an H200 capped at SIZE with set_per_process_memory_fraction (the CUDA
context outside the cap); `--gpu CARD` is that card's memory minus the context and libraries
(lab/measure/sim/gpus.py says what is assumed and why). Confirmed by a real run on CUDA when a GPU
is visible (--no-confirm skips it). With `--gpus N`, ddp/zero1/fsdp run on N simulated ranks
(rank 0 recorded: the batch and the limit are per GPU); confirming them needs N CUDA GPUs here.
"""

from __future__ import annotations

import json
import sys

from lab.commands import UsageError, gpu_memory_arg
from lab.commands.compare import (add_workload_args, check_hf, list_workloads, resolve,
                                  workload_parser)

DEFAULT_COMBOS = ["baseline", "bf16", "ckpt", "bf16+ckpt"]


def add_parser(sub) -> None:
    from lab.measure.sim.gpus import GPUS

    p = workload_parser(sub, "fit", "the largest batch that fits a GPU size, per combination")
    add_workload_args(p)
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help="what PyTorch's allocator may reserve, e.g. 16GiB, 24GB: an H200 capped "
                        "with torch.cuda.set_per_process_memory_fraction (the CUDA context is "
                        "outside the cap)")
    p.add_argument("--gpu", metavar="CARD",
                   help=f"a whole card: {', '.join(GPUS)}; the CUDA context and libraries take "
                        "their share of its memory")
    p.add_argument("--no-confirm", action="store_true",
                   help="do not confirm on CUDA even when a GPU is visible")
    p.add_argument("--max-batch", type=int, default=1 << 16, metavar="N",
                   help="stop searching above this micro-batch (default 65536)")
    p.set_defaults(func=main)


def budget(args) -> tuple[int, list[str]]:
    """(what the allocator may reserve, the lines that say what that is and why)."""
    from lab.measure.sim.gpus import CONTEXT_BYTES, gpu
    from lab.report.units import SIZE_HELP, capacity, format_bytes

    if bool(args.gpu_memory) == bool(args.gpu):
        raise UsageError(f"give --gpu-memory SIZE ({SIZE_HELP}) or --gpu CARD (--help lists "
                         "them), one of the two")
    if args.gpu_memory:
        cap = gpu_memory_arg(args.gpu_memory)
        return cap, [f"GPU: {capacity(cap)} for PyTorch's caching allocator: an H200 capped with "
                     "torch.cuda.set_per_process_memory_fraction, which counts the allocator's "
                     "reserved segments; the CUDA context and libraries live outside the cap"]
    try:
        card = gpu(args.gpu)
    except ValueError as e:
        raise UsageError(f"--gpu: {e}") from None
    return card.limit_bytes, [
        f"GPU: {card.device_name}: {capacity(card.total_bytes)} as CUDA reports it "
        f"({card.source}) − {format_bytes(CONTEXT_BYTES)} kept for the CUDA context and "
        f"libraries = {format_bytes(card.limit_bytes)} for PyTorch's caching allocator",
        f"  the {format_bytes(CONTEXT_BYTES)}: measured on the H200 (NVML used − reserved, "
        "1.20–1.29 GB), assumed for every card: mostly the kernels CUDA loads, which depend on "
        "the torch/CUDA build more than on the card (cards with fewer SMs keep less)"]


RULE = ("headroom: none beyond that. A batch fits when the allocator model, replaying the "
        "simulated training step, never needs a segment past the limit after releasing its "
        "cache and retrying - PyTorch's own out-of-memory rule; 'margin' is the limit minus the "
        "predicted max reserved (what nvidia-smi sees the process hold, minus the context)")


def main(args) -> int:
    if args.list:
        print(list_workloads())
        return 0
    capacity, lines = budget(args)
    if args.max_batch < 1:
        raise UsageError("--max-batch must be at least 1")
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    args.mode = "sim"  # sizes default to the seed scale: a fit is about a real GPU
    w, sizes, combos, scale = resolve(args, DEFAULT_COMBOS, check_batch=False)
    if w.family == "hf":
        check_hf(sizes, simulated=True)

    from lab.measure.device import cuda_available
    from lab.playground.fit import runner_probe
    from lab.workloads.fit import confirm
    from lab.workloads.fit_sim import predict, sim_recorder

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
    from lab.measure.versions import libraries_used, note_unvalidated

    results = []
    for cfg in combos:
        if not args.json:
            print(f"▶ {w.name} · {cfg.label}: predicting in sim …", file=sys.stderr,
                  flush=True)
        with libraries_used() as used:
            res = predict(sim_recorder(w.name, sizes, cfg, gpus=args.gpus), capacity, cfg,
                          max_micro=args.max_batch)
        note_unvalidated({"torch", *used})
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
                "not confirmed: no CUDA GPU here")
    else:
        note = ("confirmed on CUDA with the GPU capped at the limit "
                "(torch.cuda.set_per_process_memory_fraction; the CUDA context is outside it)")
    if args.json:
        print(json.dumps({"schema": 1, "kind": "fit", "workload": w.name, "sizes": sizes,
                          "capacity_bytes": capacity, "gpu": args.gpu, "gpus": args.gpus,
                          "limit": lines, "rule": RULE, "confirmed_on_cuda": confirm_on_cuda,
                          "note": note, "results": [r.to_dict() for r in results]}, indent=1))
    else:
        from types import SimpleNamespace

        from lab.commands.run import installed_versions
        from lab.playground.text import fit_table
        from lab.report import provenance

        sz = ", ".join(f"{k}={v}" for k, v in sizes.items() if k != "batch")
        sim = provenance(SimpleNamespace(mode="sim", scale=scale, device=None, simulated=True,
                                         torch_version=installed_versions()[0] or ""))
        per = (f" · ddp/zero1/fsdp on {args.gpus} GPUs, batch per GPU, each GPU with the limit "
               "below" if args.gpus > 1 else "")
        print(f"\n{w.name} · {sz}{per}")
        print("\n".join(lines))
        print(RULE)
        print(f"predicted: {sim}" + ("; CUDA columns: your GPU" if confirm_on_cuda else "")
              + "\n")
        print(fit_table(results))
        print(f"\n{note}")
    return 1 if any(r.status == "error" for r in results) else 0
