"""`memlab dev check | new | cite | goldens`: the course's authoring tools (see lab/dev/).

    memlab dev check                 exit 0 when every lesson is sound, else one line per problem
    memlab dev new 16-my-lesson      scaffold a lesson from the template
    memlab dev cite [--check]        rewrite the recorded-number blocks from assets/reference
    memlab dev goldens --why "..."   re-run the sim goldens and rewrite them, logging why
    memlab dev goldens --check       re-run them and list every difference (writes nothing)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("dev", help="lesson authoring: check, new, cite; the sim goldens")
    dev = p.add_subparsers(dest="dev_command", metavar="TOOL")
    c = dev.add_parser("check", help="check every lesson: files, headings, claims vs recordings, "
                                     "numbers in the text, quizzes, recordings")
    c.add_argument("--lessons", metavar="DIR", help="the course folder (default: the lab's lessons)")
    c.add_argument("--reference", metavar="DIR", help="the recordings (default: assets/reference)")
    c.add_argument("--strict", action="store_true", help="warnings (pending recordings) fail too")
    c.set_defaults(func=check_main)
    n = dev.add_parser("new", help="scaffold lessons/NN-slug from a working template")
    n.add_argument("name", help="the folder name, e.g. 16-reading-snapshots")
    n.add_argument("--title", help="the lesson's title")
    n.add_argument("--lessons", metavar="DIR", help="the course folder (default: the lab's lessons)")
    n.set_defaults(func=new_main)
    t = dev.add_parser("cite", help="render the recorded H200 numbers into each lesson.md")
    t.add_argument("--check", action="store_true", help="only list stale lessons (exit 1 if any)")
    t.add_argument("--reference", metavar="DIR", help="the recordings (default: assets/reference)")
    t.set_defaults(func=cite_main)
    g = dev.add_parser("goldens", help="re-run the sim goldens (tests/goldens/sim) and rewrite "
                                       "them with a reason, or --check them")
    g.add_argument("--why", metavar="TEXT", help="why the numbers move (logged in "
                                                 "tests/goldens/sim/CHANGES.md); required to write")
    g.add_argument("--check", action="store_true", help="only compare with the files: exit 1 on "
                                                        "any difference or missed H200 bar")
    g.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="fresh workers at a time (default 2)")
    g.set_defaults(func=goldens_main)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _course(lessons: str | None):
    from lab.course.curriculum import LESSONS_DIR, LESSONS_ENV, load_course

    root = Path(lessons or os.environ.get(LESSONS_ENV) or LESSONS_DIR)
    if not (root / "course.toml").is_file():
        raise UsageError(f"{root} is not a course folder (no course.toml)")
    return root, load_course(root)


def check_main(args) -> int:
    from lab.dev.check import check

    if args.reference and not Path(args.reference).is_dir():
        raise UsageError(f"--reference {args.reference!r} is not a folder")
    root, course = _course(args.lessons)
    problems = check(course, args.reference)
    errors = [p for p in problems if not p.warning]
    for p in problems:
        print(p, file=sys.stdout if p.warning else sys.stderr)
    failing = problems if args.strict else errors
    print(f"{len(course.lessons)} lessons checked: {len(errors)} problem(s), "
          f"{len(problems) - len(errors)} warning(s)")
    return 1 if failing else 0


def new_main(args) -> int:
    from lab.course.curriculum import LESSONS_DIR
    from lab.dev.new import NewLessonError, new_lesson

    root = Path(args.lessons or LESSONS_DIR)
    try:
        folder = new_lesson(root, args.name, args.title)
    except NewLessonError as e:
        raise UsageError(str(e)) from None
    print(f"created {folder}/: edit lesson.toml, lesson.md and experiment.py, then "
          "`memlab dev check` (CONTRIBUTING.md has the steps)")
    return 0


def cite_main(args) -> int:
    from lab.course.curriculum import load_course
    from lab.dev.cite import update
    from lab.course.reference import REFERENCE_DIR

    root = Path(args.reference) if args.reference else REFERENCE_DIR
    stale = [l.slug for l in load_course().lessons if update(l, root, check=args.check)]
    for s in stale:
        print(f"{'stale' if args.check else 'updated'}: lessons/{s}/lesson.md")
    return 1 if stale and args.check else 0


def goldens_main(args) -> int:
    from lab.dev.goldens import GOLDENS_DIR

    if args.check and args.why is not None:
        raise UsageError("give --why (rewrite the goldens) or --check (compare), not both")
    if not args.check and not (args.why or "").strip():
        raise UsageError('the sim goldens are rewritten only with a reason: --why "what changed '
                         'and why" (or --check to compare without writing)')
    if args.jobs < 1:
        raise UsageError("--jobs must be 1 or more")
    tests = GOLDENS_DIR.parent.parent
    if not tests.is_dir():
        raise UsageError(f"no {tests}: the sim goldens live in a checkout of memlab, not in an "
                         "installed wheel")
    if args.check:
        from lab.dev.goldens_regen import check

        problems = check()
        for line in problems:
            print(line, file=sys.stderr)
        print(f"sim goldens: {len(problems)} problem(s)")
        return 1 if problems else 0
    from lab.dev.goldens_regen import GoldenError, regenerate

    try:
        out = regenerate(args.why, jobs=args.jobs)
    except GoldenError as e:
        print(f"memlab dev goldens: {e}", file=sys.stderr)
        return 1
    for line in out.changed:
        print(f"  {line}")
    for line in out.h200:
        print(f"H200 bar missed: {line}", file=sys.stderr)
    print(f"wrote {len(out.written)} goldens, {len(out.changed)} change(s) logged in "
          "tests/goldens/sim/CHANGES.md")
    return 1 if out.h200 else 0
