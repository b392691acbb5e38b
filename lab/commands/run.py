"""`memlab run LESSON`: run a lesson's variants, each in its own worker, and report.

    memlab run 01                       every variant; auto mode: cuda with a GPU, else sim,
                                        both at seed scale, beside the H200 recording
    memlab run 01 --mode cpu --scale small   a real CPU run in seconds
    memlab run 01 --mode sim --scale seed --json
    memlab run --all --mode cuda --scale seed --save assets/reference

Every number printed says where it came from (lab.report.provenance); the H200 recordings
(assets/reference) are shown beside the learner's run with the measured difference.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from lab.atomic import atomic_write
from lab.commands import UsageError, gpu_memory_arg, seconds_arg
from lab.commands.live import Live
from lab.course.curriculum import Course, Lesson, load_course
from lab.measure.modes import MODE_HELP, SCALE_HELP, ModeChoice, ModeError, choose
from lab.measure.result import RunResult
from lab.report.units import SIZE_HELP
from lab.runner.protocol import RunRequest


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run a lesson's experiment and report what it measured")
    p.add_argument("lesson", nargs="?", help="lesson number (01) or id (linear-baseline)")
    p.add_argument("--all", action="store_true", help="run every lesson; print one summary table")
    p.add_argument("--variant", action="append", metavar="V",
                   help="run only this variant (repeatable); default: all of them")
    p.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"],
                   help=MODE_HELP)
    p.add_argument("--scale", choices=["seed", "small"],
                   help=SCALE_HELP + " (default: seed, or small with --mode cpu)")
    p.add_argument("--gpu-memory", metavar="SIZE",
                   help=f"a smaller virtual GPU: a variant that needs more runs out of memory "
                        f"(an OOM result; {SIZE_HELP})")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--snapshot", metavar="FILE",
                   help="save a memory snapshot that pytorch.org/memory_viz and `memlab view` "
                        "open; with several variants one file each, p.pkl -> p-baseline.pkl, "
                        "p-no_grad.pkl, … (the names are printed)")
    p.add_argument("--save", metavar="DIR",
                   help="save each result as DIR/<lesson-id>/<variant>.json (DIR is created)")
    p.add_argument("--timeout", type=seconds_arg, metavar="S", help="seconds per variant (default: the lesson's)")
    p.add_argument("--no-timing", action="store_true", help="skip the untracked timing pass")
    p.add_argument("--gpus", type=int, metavar="N",
                   help="ranks of torch.distributed for a lesson that trains on several GPUs "
                        "(its world_size): one GPU each on cuda, one process each on cpu "
                        "(gloo), simulated in one process in sim")
    p.add_argument("--exclusive", action="store_true",
                   help="cuda: every run gets a GPU of its own (step times and whole-GPU NVML "
                        "numbers undisturbed; how the H200 reference runs are recorded)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="run at most N variants at once (default: as many as the machine's runner "
                        "service admits: sim/cpu by cores, cuda runs share a GPU only when their "
                        "recorded peaks fit)")
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
    if p.exists() and not p.is_file():  # a FIFO would block the open below until a reader came
        raise UsageError(f"{what} {path!r} is not a regular file; give a file name such as "
                         "profile.pkl")
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


def make_dir(path: str, what: str) -> Path:
    """A folder to write into, created now (with its parents) so a long run cannot fail at
    the end for want of it; a one-line UsageError when that is impossible."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise UsageError(f"{what} {path!r} is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{what} {path!r}: cannot create the folder ({e.strerror or e})") from None
    if not os.access(p, os.W_OK):
        raise UsageError(f"{what} {path!r} is not a writable folder")
    return p


def snapshot_path(base: Path, lesson_id: str, variant: str, several_variants: bool,
                  several_lessons: bool) -> str:
    """One file per variant: profile.pkl -> profile-no_grad.pkl when there are several, and
    profile-<lesson-id>-<variant>.pkl across lessons (every lesson has a `baseline`)."""
    if not several_variants and not several_lessons:
        return str(base)
    tag = f"{lesson_id}-{variant}" if several_lessons else variant
    return str(base.with_name(f"{base.stem}-{tag}{base.suffix or '.pkl'}"))


def pick_mode(args, lessons: list[Lesson]) -> tuple[ModeChoice, int]:
    """The one rule (lab.measure.modes) with this machine's answer to "is there a GPU?";
    returns the choice and the number of GPUs."""
    from lab.measure.device import cuda_available

    from lab.measure.modes import MODES, may_use_gpu

    gpus, name = 0, None
    if may_use_gpu(args.mode) and cuda_available():
        import torch

        gpus = torch.cuda.device_count()
        try:
            name = torch.cuda.get_device_name(0)
        except Exception:  # a name is nice to have; the GPU is there
            name = "a CUDA GPU"
    try:  # the machine first (no GPU for --mode cuda), then what the lesson allows
        choose(args.mode, args.scale, gpu=name)
    except ModeError as e:
        raise UsageError(f"--{e}") from None
    modes = lessons[0].modes if len(lessons) == 1 else MODES
    try:
        choice = choose(args.mode, args.scale, gpu=name, lesson_modes=modes)
    except ModeError as e:
        raise UsageError(f"lesson {lessons[0].key}: {e}") from None
    return choice, gpus


def installed_versions() -> tuple[str | None, str | None]:
    """torch and transformers as installed here (package metadata: no import)."""
    import importlib.metadata as md

    out = []
    for name in ("torch", "transformers"):
        try:
            out.append(md.version(name))
        except md.PackageNotFoundError:
            out.append(None)
    return out[0], out[1]


# ---- running ---------------------------------------------------------------------------------
def main(args) -> int:
    course = load_course()
    lessons = pick_lessons(course, args)
    gpu_memory = gpu_memory_arg(args.gpu_memory)
    snapshot = check_writable_file(args.snapshot, "--snapshot") if args.snapshot else None
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    plan = [(lesson, pick_variants(lesson, args.variant)) for lesson in lessons]
    ranks_asked = getattr(args, "gpus", None)
    if ranks_asked is not None:
        if ranks_asked < 1:
            raise UsageError("--gpus must be 1 or more")
        if not args.all and "world_size" not in lessons[0].scales["seed"]:
            raise UsageError(f"lesson {lessons[0].key} runs on one GPU; --gpus is for a lesson "
                             "that trains on several (one with a world_size)")
    choice, gpus = pick_mode(args, lessons)
    mode, scale = choice.mode, choice.scale
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be 1 or more")
    save_dir = make_dir(args.save, "--save") if args.save else None
    if not args.json:
        print(f"memlab: {choice.line()}", file=sys.stderr)
    if choice.warning:
        print(f"memlab: warning: {choice.warning}", file=sys.stderr)

    live = Live(enabled=not args.json, in_place=args.jobs == 1)
    tasks = []
    for lesson, variants in plan:
        if mode not in lesson.modes:
            if not args.all:
                raise UsageError(f"lesson {lesson.key} runs in modes {', '.join(lesson.modes)}, not {mode}")
            live.note(f"· {lesson.key} {lesson.id}: skipped (runs in {', '.join(lesson.modes)})")
            continue
        # --gpus N: the lesson's world_size (lessons that have one)
        overrides = ({"world_size": ranks_asked}
                     if ranks_asked is not None and "world_size" in lesson.params(scale) else {})
        for variant in variants:
            if not lesson.variant(variant).runs_in(mode):
                why = lesson.variant(variant).not_run_in(mode)
                if args.variant and variant in args.variant:
                    raise UsageError(f"lesson {lesson.key}: {why}")
                live.note(f"· {lesson.key} {variant}: skipped ({why})")
                continue
            profile = (snapshot_path(snapshot, lesson.id, variant, len(variants) > 1, len(plan) > 1)
                       if snapshot else None)
            tasks.append((lesson, RunRequest.for_lesson(
                lesson, variant, mode, scale, overrides=overrides, gpu_memory=gpu_memory,
                profile_path=profile, timing=not args.no_timing,
                timeout_s=args.timeout or lesson.timeout_s, exclusive=args.exclusive,
            )))

    started = time.perf_counter()
    try:
        results = run_tasks(tasks, args.jobs, gpus, live, save_dir=save_dir)
    finally:
        live.close()
    total = time.perf_counter() - started
    from lab.measure.versions import note_unvalidated, used_by

    note_unvalidated(used_by(results))  # a library newer than validated, that these runs used
    if args.json:
        dicts = [r.to_dict() for r in results]
        print(json.dumps(dicts[0] if len(dicts) == 1 else dicts, indent=1))
    else:
        _print_report(plan, tasks, results, args, gpu_memory, total)
        _print_files(results, save_dir, tasks)
    failed = [r for r in results if r.status in ("error", "timeout")]
    return 1 if failed else 0


def _print_report(plan, tasks, results: list[RunResult], args, gpu_memory: int | None,
                  total: float) -> None:
    from lab.course.reference import load_reference
    from lab.report.provenance import code_path_note
    from lab.report.text import lesson_report, summary_table
    from lab.text_plots import timeline_plot

    refs = {lesson.id: load_reference(lesson.id) for lesson, _ in plan}

    def note_of(lesson) -> str | None:
        """One line when this run and the recording took other code paths (or versions)."""
        mine = [r for (l, _), r in zip(tasks, results) if l is lesson]
        note = code_path_note(mine, refs[lesson.id].values())
        return note[0] if note else None

    if args.all:
        print(summary_table(results, refs, gpu_memory=gpu_memory))
        by_note: dict[str, list[str]] = {}  # lessons that share a note are named together
        for lesson, _ in plan:
            note = note_of(lesson)
            if note:
                by_note.setdefault(note, []).append(lesson.key)
        for note, keys in by_note.items():
            print(f"\nnote ({', '.join(keys)}): {note}")
        print(f"\n{len(results)} variants in {total:.1f} s (process starts included)")
        return
    for lesson, _ in plan:
        mine = [r for (l, _), r in zip(tasks, results) if l is lesson]
        print(lesson_report(lesson, mine, refs[lesson.id], gpu_memory=gpu_memory,
                            version_note=note_of(lesson)))
        print(timeline_plot(mine, color=sys.stdout.isatty()))


def _print_files(results: list[RunResult], save_dir: Path | None, tasks) -> None:
    """Say where every file went (stderr: stdout keeps the report)."""
    snaps = [(r.variant, r.profile_path) for r in results
             if r.profile_path and Path(r.profile_path).is_file()]
    if snaps:
        print("\nmemory snapshots (open one at https://pytorch.org/memory_viz, or `memlab view "
              "FILE` here):", file=sys.stderr)
        for variant, path in snaps:
            print(f"  {path}  ({variant})", file=sys.stderr)
    elif any(req.profile_path for _, req in tasks):
        print("\nno memory snapshot was written (no variant got far enough)", file=sys.stderr)
    if save_dir is not None:
        folders = sorted({str(save_dir / lesson.id) for lesson, _ in tasks})
        print(f"\nsaved {len(results)} result{'s' * (len(results) != 1)} as <variant>.json in "
              + ", ".join(folders), file=sys.stderr)


def run_tasks(tasks: list, jobs: int | None, gpus: int, live: Live,
              save_dir: Path | None = None) -> list[RunResult]:
    """Run every (lesson, request) through the one run loop (lab.runner.loop), `jobs` at a time;
    None: as many as the runner takes (the runner service's queue then places them: one GPU
    each, or sharing one when their recorded peaks fit). Results keep task order."""
    from lab.runner.client import default_runner
    from lab.runner.loop import run_all

    runner = default_runner(gpus=gpus if gpus > 1 else 0)
    labels = [f"{lesson.key} {req.variant}" for lesson, req in tasks]

    def on_event(i: int, msg: dict) -> None:
        if msg.get("type") in ("queued", "started"):
            live.start(labels[i])
        live.event(labels[i], msg)

    def on_result(i: int, res: RunResult) -> None:
        lesson, req = tasks[i]
        live.done(labels[i], res)
        if save_dir is not None:  # as each finishes: a long --all keeps what it measured
            out = save_dir / lesson.id / f"{req.variant}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(out, json.dumps(res.to_dict(), separators=(",", ":")))

    return run_all(runner, [req for _, req in tasks], jobs=jobs, on_event=on_event,
                   on_result=on_result, announce=True)
