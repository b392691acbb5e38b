"""`memlab run LESSON`: run a lesson's variants, each in its own worker, and report.

    memlab run 01                       every variant, auto mode, small scale (seed on CUDA)
    memlab run 01 --mode sim --scale seed --json
    memlab run --all --mode cuda --scale seed --save assets/reference
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from lab.atomic import atomic_write
from lab.commands import UsageError, gpu_memory_arg
from lab.curriculum import Course, Lesson, load_course
from lab.report.units import SIZE_HELP
from lab.measure.result import RunResult
from lab.runner.client import SubprocessRunner
from lab.runner.protocol import RunRequest


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a lesson's experiment and report what it measured")
    p.add_argument("lesson", nargs="?", help="lesson number (01) or id (linear-baseline)")
    p.add_argument("--all", action="store_true", help="run every lesson; print one summary table")
    p.add_argument("--variant", action="append", metavar="V",
                   help="run only this variant (repeatable); default: all of them")
    p.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"],
                   help="auto: cuda if a GPU is present, else cpu (small) or sim (seed)")
    p.add_argument("--scale", choices=["seed", "small"],
                   help="seed: the seed documents' sizes; small: seconds on a laptop CPU "
                        "(default: seed on CUDA or in sim, small on cpu)")
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help=f"pretend the GPU has this much memory ({SIZE_HELP})")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--snapshot", metavar="FILE",
                   help="save a memory snapshot (profile.pkl) that pytorch.org/memory_viz opens")
    p.add_argument("--save", metavar="DIR", help="save each result as DIR/<lesson-id>/<variant>.json")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds per variant (default: the lesson's)")
    p.add_argument("--no-timing", action="store_true", help="skip the untracked timing pass")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run N variants at once (cuda: one per GPU, at most the GPU count)")
    p.set_defaults(func=main)


# ---- validation: every mistake becomes a one-line UsageError -----------------------------
def pick_lessons(course: Course, args) -> list[Lesson]:
    if args.all and args.lesson:
        raise UsageError("give a LESSON or --all, not both")
    if args.all:
        if args.variant:
            raise UsageError("--variant needs a single LESSON, not --all")
        return list(course.lessons)
    if not args.lesson:
        raise UsageError("which lesson? give a number (01) or an id; `memlab list` shows them")
    try:
        return [course.find(args.lesson)]
    except LookupError as e:
        raise UsageError(str(e)) from None


def pick_variants(lesson: Lesson, wanted: list[str] | None) -> list[str]:
    names = [v.name for v in lesson.variants]
    for w in wanted or []:
        if w not in names:
            raise UsageError(f"lesson {lesson.key} has no variant {w!r}; its variants: {', '.join(names)}")
    return wanted or names


def check_writable_file(path: str, what: str) -> Path:
    """Fail before any work is done, not after a long run (root passes os.access everywhere,
    so actually try to open the file)."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise UsageError(f"{what} {path!r} is a directory; give a file name such as profile.pkl")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{what} {path!r}: folder {str(parent)!r} does not exist")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as e:
        raise UsageError(f"{what} {path!r} is not writable ({e.strerror})") from None
    if not existed:
        p.unlink()
    return p


def check_writable_dir(path: str, what: str) -> Path:
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise UsageError(f"{what} {path!r} is a file, not a folder")
    probe = p if p.exists() else p.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise UsageError(f"{what} {path!r} is not a writable folder")
    return p


def snapshot_path(base: Path, variant: str, several: bool) -> str:
    """One file per variant: profile.pkl -> profile-no_grad.pkl when there are several."""
    if not several:
        return str(base)
    return str(base.with_name(f"{base.stem}-{variant}{base.suffix or '.pkl'}"))


def default_scale(mode: str) -> str:
    """cpu runs small sizes; cuda and sim run the seed's sizes; auto follows the machine."""
    if mode == "cpu":
        return "small"
    if mode in ("cuda", "sim"):
        return "seed"
    from lab.measure.device import cuda_available

    return "seed" if cuda_available() else "small"


# ---- running ---------------------------------------------------------------------------------
def _progress(enabled: bool):
    def on_event(msg: dict) -> None:
        if enabled and msg.get("type") == "phase":
            print(f"    · {msg['name']}", file=sys.stderr, flush=True)
    return on_event


def main(args) -> int:
    course = load_course()
    lessons = pick_lessons(course, args)
    gpu_memory = gpu_memory_arg(args.gpu_memory)
    snapshot = check_writable_file(args.snapshot, "--snapshot") if args.snapshot else None
    save_dir = check_writable_dir(args.save, "--save") if args.save else None
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    plan = [(lesson, pick_variants(lesson, args.variant)) for lesson in lessons]

    scale = args.scale or default_scale(args.mode)
    from lab.measure.device import resolve_mode

    mode = resolve_mode(args.mode, scale)
    gpus = 0
    if mode == "cuda":
        from lab.measure.device import cuda_available

        if not cuda_available():
            raise UsageError("--mode cuda needs a CUDA GPU and none is visible; use --mode cpu or sim")
        import torch

        gpus = torch.cuda.device_count()
    if args.jobs < 1 or (mode == "cuda" and args.jobs > gpus):
        raise UsageError(f"--jobs must be between 1 and {gpus if mode == 'cuda' else 'the cores you have'}"
                         + (" (one worker per GPU, so timings stay fair)" if mode == "cuda" else ""))

    tasks = []
    for lesson, variants in plan:
        if mode not in lesson.modes:
            if not args.all:
                raise UsageError(f"lesson {lesson.key} runs in modes {', '.join(lesson.modes)}, not {mode}")
            print(f"· {lesson.key} {lesson.id}: skipped (runs in {', '.join(lesson.modes)})",
                  file=sys.stderr)
            continue
        several = len(plan) > 1 or len(variants) > 1
        for variant in variants:
            tasks.append((lesson, RunRequest(
                lesson_path=str(lesson.path), variant=variant, mode=mode, scale=scale,
                gpu_memory=gpu_memory,
                profile_path=snapshot_path(snapshot, variant, several) if snapshot else None,
                timing=not args.no_timing, timeout_s=args.timeout or lesson.timeout_s,
            )))

    show_progress = not args.json and sys.stderr.isatty() and args.jobs == 1
    started = time.perf_counter()
    results = run_tasks(tasks, args.jobs, gpus, show_progress, quiet=args.json, save_dir=save_dir)
    if not args.json and not args.all:
        from lab.textreport import lesson_report

        for lesson, _ in plan:
            mine = [r for (l, _), r in zip(tasks, results) if l is lesson]
            print(lesson_report(lesson, mine, color=sys.stdout.isatty()))
    total = time.perf_counter() - started

    if args.json:
        dicts = [r.to_dict() for r in results]
        print(json.dumps(dicts[0] if len(dicts) == 1 else dicts, indent=1))
    elif args.all:
        from lab.textreport import summary_table

        print(summary_table(results))
        print(f"\n{len(results)} variants in {total:.1f} s (process starts included)")
    failed = [r for r in results if r.status in ("error", "timeout")]
    return 1 if failed else 0


def run_tasks(tasks: list, jobs: int, gpus: int, show_progress: bool, quiet: bool,
              save_dir: Path | None = None) -> list[RunResult]:
    """Run every (lesson, request), `jobs` at a time; with several GPUs each worker gets its own
    (CUDA_VISIBLE_DEVICES), so no two measurements share a device. Results keep task order."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    slots: queue.Queue = queue.Queue()
    for i in range(jobs):
        slots.put(i)

    def one(task):
        lesson, req = task
        slot = slots.get()
        try:
            env = {"CUDA_VISIBLE_DEVICES": str(slot)} if gpus > 1 else {}
            if not quiet:
                print(f"▶ {lesson.key} {lesson.id} · {req.variant} · {req.mode} · {req.scale}",
                      file=sys.stderr, flush=True)
            res = SubprocessRunner(extra_env=env).run(req, on_event=_progress(show_progress))
            if not quiet and jobs > 1:
                print(f"  {lesson.key} {req.variant}: {res.status}", file=sys.stderr, flush=True)
            if save_dir is not None:  # as each finishes: a long --all keeps what it measured
                out = save_dir / lesson.id / f"{req.variant}.json"
                out.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(out, json.dumps(res.to_dict(), separators=(",", ":")))
            return res
        finally:
            slots.put(slot)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, tasks))
