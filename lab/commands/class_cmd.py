"""`memlab class`: the instructor's side of a served workshop (run on the server machine).

    memlab class                      per lesson with activity: who finished, predictions
                                      against the measured peak (histogram), wrong answers
    memlab class show 03              one lesson
    memlab class export --to out/     out/class.md and out/class.csv (every lesson, or LESSON)
    memlab class push 03              run lesson 03 here once (auto mode: the GPU) and show that
                                      run on every learner's screen, after their prediction
    memlab class push 03 --results r.json   push runs made earlier (`memlab run 03 --json`,
                                      or a `--save` folder)
    memlab class goto 03              move every learner to lesson 03
    memlab class clear                forget pushed runs and the current lesson

`--data DIR` is the workshop folder `memlab serve --data DIR` uses (default: the same).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("class", help="the instructor's view of a served workshop; push runs, "
                                     "move everyone to a lesson")
    p.add_argument("--data", metavar="DIR", help="the workshop folder (as given to memlab serve)")
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    show = acts.add_parser("show", help="the class on one lesson (default: every lesson)")
    show.add_argument("lesson", nargs="?")
    exp = acts.add_parser("export", help="write class.md and class.csv")
    exp.add_argument("lesson", nargs="?")
    exp.add_argument("--to", required=True, metavar="DIR")
    push = acts.add_parser("push", help="run a lesson once and show it to every learner")
    push.add_argument("lesson")
    push.add_argument("--results", metavar="PATH",
                      help="push these results instead of running: a `memlab run --json` file "
                           "or a `--save` folder")
    push.add_argument("--mode", default="auto", choices=["auto", "cuda", "cpu", "sim"])
    push.add_argument("--scale", choices=["seed", "small"])
    push.add_argument("--variant", action="append", metavar="V")
    goto = acts.add_parser("goto", help="move every learner to a lesson")
    goto.add_argument("lesson")
    acts.add_parser("clear", help="forget pushed runs and the current lesson")
    p.set_defaults(func=main)


def _lesson(course, ref: str):
    try:
        return course.find(ref)
    except LookupError as e:
        raise UsageError(str(e)) from None


def main(args) -> int:
    from lab.curriculum import load_course
    from lab.serve.classroom import Classroom
    from lab.serve.workshop import learners, workshop_dir

    root = workshop_dir(args.data)
    course = load_course()
    action = args.action or "show"
    if action in ("goto", "push"):
        lesson = _lesson(course, args.lesson)
        room = Classroom(root)
        if action == "goto":
            room.goto(lesson.id)
            print(f"every served learner moves to {lesson.key} · {lesson.title}")
            return 0
        results = _load_results(args.results, lesson) if args.results else _run(args, lesson)
        if not results:
            raise UsageError(f"no run of lesson {lesson.key} to push")
        state = room.push(results)
        info = state["pushes"][lesson.id]
        print(f"pushed {', '.join(info['variants'])} of {lesson.key} ({info['label']}): "
              "learners see it after their prediction")
        return 0 if any(r.ok for r in results) else 1
    if action == "clear":
        Classroom(root).clear()
        print("pushed runs and the current lesson forgotten (learners' progress is kept)")
        return 0

    from lab.serve.classview import csv_report, lesson_view, markdown_report, text_report

    if not learners(root):
        print(f"no learners yet in {root} (memlab serve --data {root} creates them)",
              file=sys.stderr)
    ref = getattr(args, "lesson", None)
    lessons = [_lesson(course, ref)] if ref else course.lessons
    views = [lesson_view(root, lesson) for lesson in lessons]
    if not ref:  # every lesson: those someone has touched
        views = [v for v in views if any(r.status != "not started" for r in v.rows)] or views[:1]
    if action == "export":
        out = Path(args.to).expanduser()
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "class.md").write_text(markdown_report(views), encoding="utf-8")
            (out / "class.csv").write_text(csv_report(views), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--to {args.to!r}: {e.strerror or e}") from None
        print(f"wrote {out / 'class.md'} and {out / 'class.csv'} ({len(views)} lesson(s))")
        return 0
    width = max(40, min(100, shutil.get_terminal_size((80, 24)).columns - 2))
    print("\n\n".join(text_report(v, width) for v in views))
    return 0


def _load_results(path: str, lesson) -> list:
    from lab.measure.result import RunResult
    from lab.reference import load_reference

    p = Path(path).expanduser()
    if p.is_dir():
        found = load_reference(lesson.id, p) or load_reference(p.name, p.parent)
        if not found:
            raise UsageError(f"--results {path!r}: no <variant>.json of {lesson.id} there "
                             f"(expected {p / lesson.id}/*.json)")
        return list(found.values())
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        items = data if isinstance(data, list) else [data]
        results = [RunResult.from_dict(d) for d in items]
    except OSError as e:
        raise UsageError(f"--results {path!r}: {e.strerror or e}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise UsageError(f"--results {path!r} is not `memlab run --json` output ({e})") from None
    wrong = sorted({r.lesson for r in results} - {lesson.id})
    if wrong:
        raise UsageError(f"--results {path!r} holds runs of {', '.join(wrong)}, not {lesson.id}")
    return results


def _run(args, lesson) -> list:
    """Run the lesson here once, like `memlab run` (the runner service queues GPU runs)."""
    from lab.commands.live import Live
    from lab.commands.run import pick_mode, pick_variants, run_tasks
    from lab.runner.protocol import RunRequest

    variants = pick_variants(lesson, args.variant)
    choice, gpus = pick_mode(args, [lesson])
    print(f"memlab: {choice.line()}", file=sys.stderr)
    tasks = [(lesson, RunRequest(lesson_path=str(lesson.path), variant=v, mode=choice.mode,
                                 scale=choice.scale, timeout_s=lesson.timeout_s))
             for v in variants]
    live = Live(enabled=True, in_place=False)
    try:
        return run_tasks(tasks, None, gpus, live)
    finally:
        live.close()
