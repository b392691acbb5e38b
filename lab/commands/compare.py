"""`memlab compare WORKLOAD`: technique combinations side by side, each in its own worker.

    memlab compare mlp --combo baseline --combo bf16 --combo ckpt --combo bf16+ckpt
    memlab compare mlp --mode sim --scale seed --combo baseline --combo accum4 --json
    memlab compare linear --batch 1024 --combo baseline --combo pure-bf16 --export out/
    memlab compare qwen2-1.5b --mode sim --gpus 1024 --combo ddp --combo zero1 --combo fsdp
    memlab compare --model llama-3.2-1b --combo baseline --combo bf16+ckpt   # a shipped config
    memlab compare --config my/config.json --batch 8 --seq 2048              # your own model

The first --combo is the baseline (default: baseline, bf16, ckpt, bf16+ckpt, or the ones the
workload supports). Prints a table (peak, Δ vs baseline, step time, tokens/s), the overlaid
timelines and a peak-memory vs step-time chart; --json prints the comparison for scripts.
`--help` lists every combination token (lab.workloads.config.TOKENS).
"""

from __future__ import annotations

import argparse
import json
import sys

from lab.commands import UsageError, gpu_memory_arg, seconds_arg
from lab.measure.modes import MODE_HELP, SCALE_HELP

DEFAULT_COMBOS = ["baseline", "bf16", "ckpt", "bf16+ckpt"]
PARALLEL_COMBOS = ["ddp", "zero1", "fsdp", "fsdp+bf16", "fsdp+ckpt"]  # the default with --gpus


def workload_parser(sub, name: str, help: str):
    """A `compare`/`fit` subparser whose --help ends with the table of combination tokens."""
    from lab.workloads import tokens_help

    return sub.add_parser(name, help=help, epilog=tokens_help(),
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def add_workload_args(p) -> None:
    """Arguments shared by `compare` and `fit`."""
    p.add_argument("workload", nargs="?", help="linear, mlp, gpt2-tiny, … (`memlab compare --list`)")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("--model", metavar="NAME",
                   help="a causal LM shipped as a config (assets/models: llama-3.2-1b, gpt2, "
                        "qwen2.5-0.5b, …; `--list` shows them), trained with the plain Hugging "
                        "Face loop, random weights")
    p.add_argument("--config", metavar="FILE.json",
                   help="your causal LM's config.json (Llama, Qwen2, Mistral, Gemma, Phi, GPT-2, "
                        "…): built with random weights, no download, trained with the plain "
                        "Hugging Face loop: model(input_ids=ids, labels=ids).loss")
    p.add_argument("--combo", action="append", metavar="C",
                   help="a technique combination such as bf16+ckpt+accum4 (repeatable; the "
                        "first is the baseline)")
    p.add_argument("--scale", choices=["small", "seed"],
                   help="the workload's default sizes. " + SCALE_HELP +
                        " (default: seed, or small with --mode cpu)")
    p.add_argument("--batch", type=int, help="batch size")
    p.add_argument("--seq", type=int, help="sequence length (workloads that have one)")
    p.add_argument("--steps", type=int, help="optimizer steps per run (default 2)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="any other size of the workload, e.g. --set layers=8 (repeatable)")
    p.add_argument("--gpus", type=int, default=1, metavar="N",
                   help="ranks for the data-parallel combinations (ddp, zero1, fsdp; their batch "
                        "is per rank): one GPU each on cuda, one process each on cpu, simulated "
                        "in one process in sim (any N, e.g. 1024); default 1")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--timeout", type=seconds_arg, metavar="S", default=600.0,
                   help="seconds per worker (default 600)")


def add_parser(sub) -> None:
    p = workload_parser(sub, "compare", "compare technique combinations on one workload")
    add_workload_args(p)
    p.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"],
                   help=MODE_HELP)
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help="pretend the GPU has this much memory (a combination that needs more "
                        "is an OOM result)")
    p.add_argument("--no-timing", action="store_true", help="skip the untracked timing pass")
    p.add_argument("--export", metavar="DIR",
                   help="also write DIR/result.json, DIR/report.md and one memory snapshot per "
                        "combination, DIR/profile-<combination>.pkl (DIR is created)")
    p.set_defaults(func=main)


def list_workloads() -> str:
    from lab.workloads import all_workloads

    lines = []
    for w in all_workloads().values():
        lines.append(f"  {w.name:<12} {w.title}")
        for scale, sizes in w.sizes.items():
            lines.append(f"      {scale:<6} " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
    return ("workloads, with their default sizes per scale (seed: the sizes of the seed "
            "tutorials the course was built from; small: seconds on a laptop CPU); the shipped "
            "configs (family hf) also take --model NAME, your own --config FILE.json:\n"
            + "\n".join(lines))


def default_scale(mode: str) -> str:
    """seed, except for cpu (small); auto follows lab.measure.modes: seed on a GPU and in sim."""
    from lab.measure.modes import default_scale as scale_for

    return "seed" if mode == "auto" else scale_for(mode)


def resolve(args, default_combos: list[str], check_batch: bool = True):
    """(workload, sizes, combos, scale) from the shared arguments, or a UsageError."""
    from lab.workloads import ComboError, parse_combos, parse_sizes

    w = pick_workload(args)
    scale = args.scale or default_scale(getattr(args, "mode", "sim"))
    if scale not in w.sizes:
        raise UsageError(f"{w.name} has no {scale} sizes (it has {', '.join(w.sizes)}): a "
                         "config's model runs at full size, in sim or on CUDA")
    try:
        sizes = w.default_sizes(scale)
        sizes.update(parse_sizes(args.set))
    except (KeyError, ValueError) as e:
        raise UsageError(f"--set: {str(e).strip(chr(39))}") from None
    unknown = sorted(set(sizes) - set(w.size_names()))
    if unknown:
        raise UsageError(f"--set: workload {w.name!r} has no size {', '.join(unknown)}; its "
                         f"sizes: {', '.join(w.size_names())}")
    for key in ("batch", "seq", "steps"):
        v = getattr(args, key)
        if v is not None:
            if v < 1:
                raise UsageError(f"--{key} must be at least 1")
            if key == "seq" and "seq" not in sizes:
                raise UsageError(f"workload {w.name!r} has no sequence length")
            sizes[key] = v
    gpus = getattr(args, "gpus", 1)
    if gpus < 1:
        raise UsageError("--gpus must be 1 or more")
    if gpus > 1 and not args.combo:
        default_combos = PARALLEL_COMBOS
    wanted = args.combo or [c for c in default_combos if _supported(w, c)]
    try:
        combos = parse_combos(wanted)
        if gpus > 1 and not any(cfg.parallel != "none" for cfg in combos):
            raise ComboError(f"--gpus {gpus} is for the data-parallel combinations; add one of "
                             "ddp, zero1, fsdp (e.g. --combo fsdp)")
        for cfg in combos:
            w.check(cfg, sizes if check_batch else None)
    except ComboError as e:
        raise UsageError(str(e)) from None
    return w, sizes, combos, scale


def pick_workload(args):
    """The workload the arguments name: a registered one, --model NAME or --config FILE."""
    from lab.workloads import get_workload
    from lab.workloads.hf_config import ConfigError, shipped_models
    from lab.workloads.registry import config_workload

    given = [x for x in (args.workload, args.model, args.config) if x]
    if len(given) > 1:
        raise UsageError("name one model: a workload, --model NAME or --config FILE.json")
    if not given:
        raise UsageError("which workload? e.g. `memlab compare mlp`, `--model llama-3.2-1b` or "
                         "`--config config.json`; --list shows them")
    if args.config:
        try:
            return config_workload(args.config)
        except ConfigError as e:
            raise UsageError(f"--config {e}") from None
    if args.model and args.model not in shipped_models():
        raise UsageError(f"--model: no shipped config {args.model!r}; the shipped ones: "
                         f"{', '.join(shipped_models())} (or --config FILE.json)")
    try:
        return get_workload(args.model or args.workload)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None


def check_hf(sizes: dict, simulated: bool) -> None:
    """A config.json the lab cannot build is a UsageError before anything runs. Reading it is
    torch-free; asking transformers whether it knows the model_type imports torch (seconds)."""
    from lab.workloads.hf_config import ConfigError, check_seq, read_config

    try:
        d = read_config(sizes["model"], simulated=simulated)
        check_seq(d, int(sizes["seq"]), "--seq")
        from lab.workloads.models import hf_config_object

        hf_config_object(d)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def _supported(w, combo: str) -> bool:
    from lab.workloads import ComboError, parse_combo

    try:
        w.check(parse_combo(combo))
        return True
    except ComboError:
        return False


def pick_mode(args, scale_asked: str | None):
    """The one rule (lab.measure.modes), as `memlab run` applies it."""
    from lab.measure.device import cuda_available
    from lab.measure.modes import ModeError, choose, may_use_gpu

    try:
        # probe for a GPU only when the asked mode could use one (the probe imports torch)
        gpu = may_use_gpu(args.mode) and cuda_available()
        return choose(args.mode, scale_asked, gpu=gpu)
    except ModeError as e:
        raise UsageError(f"--{e}") from None



def cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def main(args) -> int:
    if args.list:
        print(list_workloads())
        return 0
    from lab.commands.live import Live
    from lab.playground import ComparePlan, run_compare

    w, sizes, combos, scale = resolve(args, DEFAULT_COMBOS)  # bad input fails before torch loads
    choice = pick_mode(args, args.scale)
    mode = choice.mode  # choice.scale == scale: both follow lab.measure.modes
    if w.family == "hf":
        check_hf(sizes, simulated=choice.info.simulated)
    gpu_memory = gpu_memory_arg(args.gpu_memory)
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    export_dir = None
    if args.export:
        from lab.commands.run import make_dir

        export_dir = make_dir(args.export, "--export")
    # every mode writes a snapshot when asked: the allocator's history on cuda, the tensor
    # tracker's trace (in memory_viz's format) in cpu and sim
    plan = ComparePlan(w.name, sizes, combos, mode, scale, gpu_memory, not args.no_timing,
                       args.timeout, profile_dir=str(export_dir) if export_dir else None,
                       gpus=args.gpus)
    from lab.runner.client import default_runner

    gpus_here = cuda_gpus() if choice.info.on_gpu else 0
    if choice.info.on_gpu and args.gpus > gpus_here:
        raise UsageError(f"--gpus {args.gpus}: this machine has {gpus_here} CUDA GPU(s); "
                         "simulate more with --mode sim")

    if not args.json:
        print(f"memlab: {choice.line()}", file=sys.stderr)
        print(f"memlab: {w.name} · " + ", ".join(c.label for c in combos), file=sys.stderr)
    if choice.warning:
        print(f"memlab: warning: {choice.warning}", file=sys.stderr)
    live = Live(enabled=not args.json)
    labels = iter([c.label for c in combos])

    def on_result(res) -> None:  # the combinations run in order: end one line, start the next
        live.done(res.variant, res)
        nxt = next(labels, None)
        if nxt is not None:
            live.start(nxt)

    live.start(next(labels))
    try:
        # several GPUs: the direct runner hands them out, one per rank
        runner = default_runner(gpus=gpus_here) if gpus_here > 1 else default_runner()
        comparison = run_compare(plan, runner, on_event=live.event, on_result=on_result)
    finally:
        live.close()
    from lab.measure.versions import note_unvalidated, used_by

    note_unvalidated(used_by(comparison.results))
    if export_dir is not None:
        from lab import text_plots
        from lab.report.export import ExportError, export

        try:
            written = export(comparison, export_dir, plots=text_plots)
        except ExportError as e:
            raise UsageError(str(e)) from None
        print("memlab: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    if args.json:
        print(json.dumps(comparison.to_dict(), indent=1))
    else:
        print(render(comparison))
    failed = [r for r in comparison.rows if r.status in ("error", "timeout")]
    return 1 if failed else 0


def render(comparison, width: int | None = None) -> str:
    import shutil

    from lab.playground.text import comparison_header, comparison_table
    from lab.text_plots import timeline_plot, tradeoff_plot

    width = width or min(120, shutil.get_terminal_size((100, 30)).columns)
    return "\n".join(["", comparison_header(comparison), "", comparison_table(comparison), "",
                      timeline_plot(comparison.results, width=width), "",
                      tradeoff_plot(comparison, width=width)])
