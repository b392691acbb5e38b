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
    memlab class release ada          free the name "ada" for another browser (a learner who
                                      changed machines and lost the code; progress is kept)

`--data DIR` is the workshop folder `memlab serve --data DIR` uses (default: the same).
"""

from __future__ import annotations

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
    release = acts.add_parser("release", help="free a learner's name for another browser "
                                              "(their progress is kept)")
    release.add_argument("name")
    p.set_defaults(func=main)


def _lesson(course, ref: str):
    try:
        return course.find(ref)
    except LookupError as e:
        raise UsageError(str(e)) from None


def main(args) -> int:
    from lab.course.curriculum import load_course
    from lab.serve.classroom import Classroom
    from lab.serve.workshop import learners, workshop_dir
    from lab.user_files import UserFileError

    try:
        root = workshop_dir(args.data)
    except UserFileError as e:  # --data names a file
        raise UsageError(str(e)) from None
    action = args.action or "show"
    if action == "release":
        return _release(root, args.name)
    course = load_course()
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
        try:
            state = room.push(results)
        except ValueError as e:  # a variant name that is no safe file name, a non-finite value
            raise UsageError(f"--results {args.results!r}: {e}" if args.results
                             else str(e)) from None
        info = state["pushes"][lesson.id]
        print(f"pushed {', '.join(info['variants'])} of {lesson.key} ({info['label']}): "
              "learners see it after their prediction")
        return 0 if any(r.ok for r in results) else 1
    if action == "clear":
        Classroom(root).clear()
        print("pushed runs and the current lesson forgotten (learners' progress is kept)")
        return 0

    from lab.serve.classview import csv_report, lesson_view, markdown_report, text_report

    ref = getattr(args, "lesson", None)
    lessons = [_lesson(course, ref)] if ref else course.lessons  # a wrong ref: its line alone
    if not learners(root):
        print(f"no learners yet in {root} (memlab serve --data {root} creates them)",
              file=sys.stderr)
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


def _release(root: Path, raw: str) -> int:
    from lab.serve.identity import Identity
    from lab.serve.workshop import learners, sanitize_name

    try:
        name = sanitize_name(raw)
    except ValueError as e:
        raise UsageError(str(e)) from None
    # the secret is not needed to forget a claim: every cookie signed for it stops working
    if not Identity(root, b"").release(name):
        raise UsageError(f"no claimed name {name!r} in {root} (learners: "
                         f"{', '.join(learners(root)) or 'none'})")
    print(f"{name!r} is free: the next browser that gives this name takes it, with its "
          "progress (the lab shows that browser a new code)")
    return 0


def _load_results(path: str, lesson) -> list:
    """The runs to push, every field checked (lab.decode): they are played back in every
    learner's app, so a file that is not what `memlab run --json` wrote stops here."""
    from lab.decode import DecodeError, loads, result_from_dict, results_from_json
    from lab.user_files import RESULT_LIMIT, UserFileError, read_user_file

    p = Path(path).expanduser()
    try:
        if p.is_dir():
            folder = p / lesson.id if (p / lesson.id).is_dir() else p
            files = sorted(folder.glob("*.json"))
            if not files:
                raise UsageError(f"--results {path!r}: no <variant>.json of {lesson.id} there "
                                 f"(expected {p / lesson.id}/*.json)")
            return [result_from_dict(loads(read_user_file(f, RESULT_LIMIT), str(f)), str(f))
                    for f in files]
        results = results_from_json(loads(read_user_file(p, RESULT_LIMIT), "it"))
    except UserFileError as e:
        raise UsageError(f"--results {e}") from None
    except OSError as e:
        raise UsageError(f"--results {path!r}: {e.strerror or e}") from None
    except DecodeError as e:
        raise UsageError(f"--results {path!r} is not `memlab run --json` output: {e}") from None
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
    tasks = [(lesson, RunRequest.for_lesson(lesson, v, choice.mode, choice.scale))
             for v in variants]
    live = Live(enabled=True, in_place=False)
    try:
        return run_tasks(tasks, None, gpus, live)
    finally:
        live.close()
