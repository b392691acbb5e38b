"""How fast sim answers `y` and `memlab fit`, and where the time goes (issue 25). Prints, never asserts.

    python bench/sim_speed.py split   [--lesson 03 ...] [--process variant|lesson]
    python bench/sim_speed.py lessons [--lesson 03 ...] [--all] [--repeat 3]
    python bench/sim_speed.py fit     [--split]
    python bench/sim_speed.py fingerprint FILE [--lesson 03 ...] [--compare OLD]
    python bench/sim_speed.py variants [--lesson 08] [--repeat 3] [--profile 08:bf16]

split      where a sim run's CPU time goes, per variant and per lesson: worker start (a fresh
           Python to "ready": imports of torch, lab.measure, transformers, the first dispatch),
           then each variant cold, as a worker runs it (`--process variant`: a fresh process
           per variant, as single-use workers do; `lesson`: one process for the lesson's variants,
           in the order `y` runs them), split by component (bench/time_split.py: FakeTensorMode,
           the tracker's dispatch, user_frame(), the policy's hooks, the allocator model, result
           building, the experiment's own code) and by phase (the model build).
lessons    the learner's `y`, end to end: the runner service started and its zygote ready (the
           app starts it at launch), every variant of the lesson through it in the lesson's
           order (the selected variant, the baseline, first), as many at once as the app runs
           them (lab.runner.loop.side_by_side; `--jobs N`): seconds to the first variant's
           result and to the last, and the last against issue 25's yardstick, a bare
           `import torch, transformers` + the GPT-2 class in a fresh process. On an older
           checkout (copy this file there) it runs one at a time, as the app did then.
fit        `memlab fit gpt2-small --gpu-memory 16GiB --combo baseline --combo bf16+ckpt` in a
           fresh process: wall and CPU seconds (children included); `--split`: its split too.
fingerprint  every variant's result in sim (what the learner sees, less times and dates), one
           digest per variant, written to FILE; `--compare OLD` prints the variants whose
           digest moved (the numbers must not move when only speed changes).
variants   the older figure: seconds per variant in this process (imports paid once).

CPU seconds are steadier than wall seconds on a shared machine; every table says the load
average (1 min) before and after. Uses a temporary MEMLAB_HOME: no cached result, no runner
service of yours.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
# by id: the course map's numbers move when a lesson is inserted (lessons 27-28 moved many-gpus
# from 22 to 26, and "22" then measured allocator-tuning)
DEFAULT_LESSONS = ["training-cycle", "mixed-precision", "out-of-memory", "many-gpus", "memory-budget"]
FIT_ARGS = ["fit", "gpt2-small", "--gpu-memory", "16GiB", "--combo", "baseline",
            "--combo", "bf16+ckpt"]


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.setdefault("MEMLAB_HOME", tempfile.mkdtemp(prefix="memlab-bench-"))
    env.pop("MEMLAB_RUNNER", None)
    return env


def _child(args: list[str]) -> dict:
    """Run this script's hidden `_child` command in a fresh Python; its JSON answer."""
    out = subprocess.run([sys.executable, __file__, "_child", *args], env=_env(),
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def lessons_of(keys: list[str] | None):
    from lab.course.curriculum import load_course

    course = load_course()
    return [course.find(k) for k in (keys or DEFAULT_LESSONS)]


# ---- the child: imports and variants, cold --------------------------------------------------
def child_main(argv: list[str]) -> None:
    """`_child imports` | `_child run LESSON V1 V2 ...` | `_child fit`: JSON on the last line."""
    clock = time.process_time
    if argv[0] == "imports":
        steps, c = {}, clock()
        import torch  # noqa: F401
        steps["import torch"] = clock() - c
        c = clock()
        from lab.measure import measure
        import lab.course.curriculum  # noqa: F401
        steps["import lab.measure, lab.course.curriculum"] = clock() - c
        c = clock()
        import transformers
        for name in ("GPT2LMHeadModel", "Qwen2ForCausalLM", "AutoModelForCausalLM"):
            getattr(transformers, name, None)
        steps["import transformers (+ GPT-2, Qwen2 classes)"] = clock() - c
        c = clock()
        measure.warm_up_dispatch_mode()
        steps["first dispatch (imports torch._dynamo)"] = clock() - c
        print(json.dumps({"steps": steps}))
        return
    from lab.runner.worker import warm_up

    warm_up()  # what a warm worker did before its request
    from time_split import TimeSplit, measure_wrapper_cost

    if argv[0] == "fit":
        from lab.cli import main as cli_main

        c = clock()
        with TimeSplit() as split:
            code = cli_main(FIT_ARGS)
        print(json.dumps({"code": code, "cpu_s": clock() - c, "split": split.seconds(),
                          "calls": sum(split.calls.values()),
                          "wrapper_s": measure_wrapper_cost() * sum(split.calls.values())}))
        return
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    lesson = load_course().find(argv[1])
    out = []
    per_call = measure_wrapper_cost()
    for v in argv[2:]:
        c = clock()
        with TimeSplit() as split:
            r = measure_request(RunRequest.for_lesson(lesson, v, "sim", "seed"),
                                emit=lambda msg: None)
            json.dumps(r.to_dict())
        calls = sum(split.calls.values())
        out.append({"variant": v, "status": r.status, "cpu_s": clock() - c,
                    "split": split.seconds(), "model_s": sum(s for p, s in split.phases.items()
                                                             if p == "model"),
                    "dispatches": split.calls["tracker dispatch"],
                    "wrapper_s": calls * per_call})
    print(json.dumps({"variants": out}))


# ---- split -----------------------------------------------------------------------------------
def cmd_split(args) -> None:
    print(f"# where a sim run's CPU time goes ({os.cpu_count()} cores, {load()})")
    imports = _child(["imports"])["steps"]
    print("\nworker start (a fresh Python to ready), CPU s:")
    for k, v in imports.items():
        print(f"  {k:48} {v:6.2f}")
    print(f"  {'in all':48} {sum(imports.values()):6.2f}")
    grand = {}
    for lesson in lessons_of(args.lesson):
        names = [v.name for v in lesson.variants]
        groups = [[n] for n in names] if args.process == "variant" else [names]
        rows = [row for g in groups for row in _child(["run", lesson.key, *g])["variants"]]
        comps: dict[str, float] = {}
        for row in rows:
            for k, s in row["split"].items():
                comps[k] = comps.get(k, 0.0) + s
        total = sum(r["cpu_s"] for r in rows)
        wrap = sum(r["wrapper_s"] for r in rows)
        print(f"\nlesson {lesson.key} ({lesson.id}), {len(rows)} variants, a fresh process per "
              f"{args.process}, {load()}")
        print(f"  {'variant':24} {'cpu s':>6} {'model':>6} {'ops':>7}  top components")
        for r in rows:
            top = ", ".join(f"{k.split(' (')[0]} {s:.2f}" for k, s in list(r["split"].items())[:3])
            print(f"  {r['variant']:24} {r['cpu_s']:6.2f} {r['model_s']:6.2f} "
                  f"{r['dispatches']:7d}  {top}  [{r['status']}]")
        print(f"  {'all variants':24} {total:6.2f}   (the split's wrappers: ~{wrap:.2f} s of it)")
        for k, s in sorted(comps.items(), key=lambda kv: -kv[1]):
            print(f"    {k:44} {s:7.2f}  {100 * s / total:5.1f} %")
        grand[lesson.key] = total
    if args.process == "variant":
        start = sum(imports.values())
        print(f"\nsingle-use workers: each variant also pays a worker start ({start:.2f} s CPU) "
              "on a spare core, ahead of need")
    print(f"\n{load()}")


# ---- lessons: the learner's `y` --------------------------------------------------------------
def cmd_lessons(args) -> None:
    os.environ.update({k: v for k, v in _env().items() if k in ("MEMLAB_HOME",)})
    os.environ.pop("MEMLAB_RUNNER", None)
    from lab.runner import remote
    from lab.runner.client import SubprocessRunner
    from lab.runner.loop import run_all
    from lab.runner.protocol import RunRequest
    from lab.runner.remote import ServiceRunner

    from lab.runner import loop

    jobs = args.jobs or (loop.side_by_side("sim") if hasattr(loop, "side_by_side") else 1)
    bare = bare_import_s()
    print(f"# `y` in sim at seed scale, through the runner service, {jobs} variant(s) at a time "
          f"({os.cpu_count()} cores, {load()}; MEMLAB_HOME {os.environ['MEMLAB_HOME']})\n"
          f"# the yardstick (issue 25's): a bare `import torch, transformers` + the GPT-2 class, "
          f"median of 3 fresh processes: {bare:.2f} s")
    service = ServiceRunner(fallback=SubprocessRunner())
    summary, digests = [], {}
    from lab.course.curriculum import load_course

    chosen = load_course().lessons if args.all else lessons_of(args.lesson)
    try:
        for lesson in [lesson for lesson in chosen for _ in range(args.repeat)]:
            remote.stop_service()
            _ready_service()
            side = {"background": True} if jobs > 1 and "background" in RunRequest.__dataclass_fields__ else {}
            reqs = [lesson_request(RunRequest, lesson, v.name, **(side if i else {}))
                    for i, v in enumerate(lesson.variants)]
            before, t0, done = load(), time.perf_counter(), []
            run_all(service, reqs, jobs=jobs, announce=True,
                    on_result=lambda i, r: done.append((time.perf_counter() - t0, r)))
            total = time.perf_counter() - t0
            first = done[0][0] if done else float("nan")
            print(f"\nlesson {lesson.key} ({lesson.id}): first result {first:6.2f} s, all "
                  f"{len(done)} variants {total:6.2f} s   ({before} -> {load()})")
            prev = 0.0
            for at, r in done:
                print(f"  {r.variant:24} at {at:7.2f} s  (+{at - prev:6.2f}; the worker's own "
                      f"{r.wall_s or 0:6.2f} s)  {r.status}")
                prev = at
            summary.append((lesson.key, first, total))
            digests.update({f"{lesson.key}:{r.variant}": digest(r) for _, r in done})
            if args.fingerprint:
                Path(args.fingerprint).write_text(json.dumps(digests, indent=1))
    finally:
        remote.stop_service()
    if service.fallbacks:
        print(f"WARNING: {service.fallbacks} runs did not reach the service: "
              f"{service.fallback_reason}")
    print(f"\n{'lesson':8} {'first s':>8} {'all s':>8} {'all / bare import':>18}"
          + ("   (medians of the repeats)" if args.repeat > 1 else ""))
    for key in dict.fromkeys(k for k, _, _ in summary):
        firsts = sorted(f for k, f, _ in summary if k == key)
        totals = sorted(t for k, _, t in summary if k == key)
        first, total = firsts[len(firsts) // 2], totals[len(totals) // 2]
        print(f"{key:8} {first:8.2f} {total:8.2f} {total / bare:17.1f}x")
    print(load())


def lesson_request(RunRequest, lesson, variant: str, **kw):
    """A sim request at seed scale for `variant`, as this checkout's runner takes it (older
    checkouts, which this file may be copied into, had no RunRequest.for_lesson)."""
    if hasattr(RunRequest, "for_lesson"):
        return RunRequest.for_lesson(lesson, variant, "sim", "seed", **kw)
    return RunRequest(str(lesson.path), variant, mode="sim", scale="seed",
                      timeout_s=lesson.timeout_s, ranks=lesson.ranks("seed", "sim"), **kw)


def bare_import_s(n: int = 3) -> float:
    """Wall seconds of a fresh `import torch, transformers` + the GPT-2 class (the median of n)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch, transformers; "
                        "transformers.GPT2LMHeadModel"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return sorted(times)[n // 2]


def _ready_service(timeout_s: float = 300.0) -> None:
    """Start the service as the app does at launch and wait until its spares are ready."""
    from lab.runner import remote

    remote.connect().close()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = remote.ask("state")["pool"]
        cpu = state["keys"].get("cpu", {})
        if cpu.get("ready", 0) >= state["per_key"]:
            return
        if not cpu and time.monotonic() > deadline - timeout_s + 5:
            return  # no key in use after a while: spares start with the first run
        time.sleep(0.2)


# ---- fit ---------------------------------------------------------------------------------------
def cmd_fit(args) -> None:
    print(f"# memlab {' '.join(FIT_ARGS)}, in a fresh process ({os.cpu_count()} cores, {load()})")
    before_cpu, t0 = child_cpu(), time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "lab", *FIT_ARGS], env=_env(),
                         capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, child_cpu() - before_cpu
    print(out.stdout.strip().split("\n\n")[-2] if out.returncode == 0 else out.stderr[-2000:])
    bare = bare_import_s()
    print(f"\nwall {wall:6.2f} s   CPU {cpu:6.2f} s (its forked children included)   {load()}")
    print(f"wall / a bare `import torch, transformers` + the GPT-2 class ({bare:.2f} s): "
          f"{wall / bare:.1f}x")
    if args.split:
        res = _child(["fit"])
        print(f"\nsplit of the same command in one process (CPU of the main thread; the second "
              f"batch recorded in a forked child is not in it), {load()}:")
        for k, s in res["split"].items():
            print(f"  {k:44} {s:7.2f}")
        print(f"  (the split's wrappers: ~{res['wrapper_s']:.2f} s)")


# ---- fingerprint -------------------------------------------------------------------------------
TIMES = {"created", "wall_s", "t", "duration_s", "step_time_s", "timing"}
# what moves on unchanged code: lesson 04 times its snapshot's dump and weighs the pickle
# (pickled timestamps and ids); paths name the checkout
MOVING_METRICS = {"dump_s", "snapshot_bytes"}


def _strip(value):
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if k not in TIMES and k not in MOVING_METRICS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str):
        return value.replace(str(ROOT), "<checkout>")
    return value


def digest(result) -> str:
    """The result as the learner sees it, less times and dates: equal digests, equal numbers."""
    doc = json.dumps(_strip(result.to_dict()), sort_keys=True)
    return hashlib.sha256(doc.encode()).hexdigest()


def cmd_fingerprint(args) -> None:
    if args.compare:
        old, new = json.loads(Path(args.compare).read_text()), json.loads(Path(args.file).read_text())
        moved = [k for k in old if k in new and old[k] != new[k]]
        print(f"{len(old)} variants before, {len(new)} after, {len(set(old) & set(new))} in both; "
              f"moved: {moved or 'none'}")
        return
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request, warm_up

    warm_up()
    course = load_course()
    chosen = [course.find(k) for k in args.lesson] if args.lesson else course.lessons
    out = {}
    for lesson in chosen:
        for v in lesson.variants:
            r = measure_request(RunRequest.for_lesson(lesson, v.name, "sim", "seed"))
            out[f"{lesson.key}:{v.name}"] = digest(r)
            print(f"{lesson.key}:{v.name} {r.status} {out[f'{lesson.key}:{v.name}'][:12]}",
                  flush=True)
    Path(args.file).write_text(json.dumps(out, indent=1))


# ---- variants (the older figure) ---------------------------------------------------------------
def timed(label: str, fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    print(f"{label:40} wall {time.perf_counter() - w:6.2f} s   cpu {time.process_time() - c:6.2f} s")
    return out


def cmd_variants(args) -> None:
    timed("import torch", lambda: __import__("torch"))
    timed("import lab.measure.measure", lambda: __import__("lab.measure.measure"))
    timed("import transformers (GPT-2, Qwen2)", lambda: (
        __import__("transformers.models.gpt2.modeling_gpt2"),
        __import__("transformers.models.qwen2.modeling_qwen2")))
    from lab.course.curriculum import load_course
    from lab.runner.protocol import RunRequest
    from lab.runner.worker import measure_request

    def run(lesson, variant):
        return measure_request(RunRequest.for_lesson(lesson, variant, "sim", "seed", timing=False))

    course = load_course()
    if args.profile:
        import cProfile
        import pstats

        key, variant = args.profile.split(":")
        lesson = course.find(key)
        run(lesson, variant)
        cProfile.runctx("run(lesson, variant)", globals(), locals(), "/tmp/sim_speed.prof")
        pstats.Stats("/tmp/sim_speed.prof").sort_stats("tottime").print_stats(25)
        return
    total_w = total_c = 0.0
    print(f"\n{'variant':34} {'wall s':>7} {'cpu s':>7}  status   ({load()})")
    for lesson in course.lessons:
        if args.lesson and not any(lesson.key == f or lesson.id == f for f in args.lesson):
            continue
        for v in lesson.variants:
            best = None
            for _ in range(max(1, args.repeat)):
                w, c = time.perf_counter(), time.process_time()
                r = run(lesson, v.name)
                w, c = time.perf_counter() - w, time.process_time() - c
                best = (w, c) if best is None or c < best[1] else best
            total_w += best[0]
            total_c += best[1]
            print(f"{lesson.key + ' ' + v.name:34} {best[0]:7.2f} {best[1]:7.2f}  {r.status}")
    print(f"{'all variants':34} {total_w:7.2f} {total_c:7.2f}   ({load()})")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_child":
        return child_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("split")
    p.add_argument("--lesson", action="append")
    p.add_argument("--process", choices=["variant", "lesson"], default="variant")
    p = sub.add_parser("lessons")
    p.add_argument("--lesson", action="append")
    p.add_argument("--all", action="store_true", help="every lesson of the course")
    p.add_argument("--fingerprint", metavar="FILE", help="also write the results' digests here")
    p.add_argument("--repeat", type=int, default=1,
                   help="run each lesson's `y` this many times (a fresh service each); the "
                        "table gives the medians (a shared 2-core machine moves by ±30 %%)")
    p.add_argument("--jobs", type=int, default=None,
                   help="variants at once (default: as the app runs them, "
                        "lab.runner.loop.side_by_side; 1 where that does not exist)")
    p = sub.add_parser("fit")
    p.add_argument("--split", action="store_true")
    p = sub.add_parser("fingerprint")
    p.add_argument("file")
    p.add_argument("--lesson", action="append")
    p.add_argument("--compare", metavar="OLD")
    p = sub.add_parser("variants")
    p.add_argument("--lesson", action="append")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--profile")
    args = ap.parse_args()
    {"split": cmd_split, "lessons": cmd_lessons, "fit": cmd_fit, "fingerprint": cmd_fingerprint,
     "variants": cmd_variants}[args.cmd](args)


if __name__ == "__main__":
    main()
