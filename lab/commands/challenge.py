"""`memlab challenge list | start ID [--fresh] | check ID [--json]`: the graded challenges.

`start` copies a challenge's starting code into your data folder and prints its path (open it in
$EDITOR); `check` runs your copy in sim and says, goal by goal, whether it passes. The grade is
kept in your progress and shown on the course map. Exit codes: 0 passed (or done), 1 checked
and not passed, 2 a mistake (unknown id, not started, a served workshop).
"""

from __future__ import annotations

import json
import os
import sys

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("challenge", help="graded challenges: list, start (copy to edit), check")
    p.set_defaults(func=main, action=None)
    a = p.add_subparsers(dest="action", metavar="ACTION")
    a.add_parser("list", help="the challenges and which you passed").add_argument(
        "--json", action="store_true", help="print JSON")
    s = a.add_parser("start", help="copy a challenge's starting code to edit")
    s.add_argument("id")
    s.add_argument("--fresh", action="store_true",
                   help="start over: your current copy is kept as a dated .bak.py beside it")
    c = a.add_parser("check", help="run your copy in sim and grade it")
    c.add_argument("id")
    c.add_argument("--json", action="store_true", help="print the grade as JSON")


def main(args) -> int:
    from lab.course import challenges as chl
    from lab.course.curriculum import load_course
    from lab.serve.policy import Refused

    if args.action is None:
        raise UsageError("say what to do: memlab challenge list | start ID | check ID")
    course = load_course()
    try:
        if args.action == "list":
            return _list(course, args.json)
        ch = chl.find(course, args.id)
        if args.action == "start":
            path, new = chl.start(ch, fresh=args.fresh)
            print(f"{ch.title}\n")
            print(ch.brief)
            print(f"\n{'Your copy' if new else 'Your copy (kept, as you left it)'}: {path}")
            editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
            print(f"Edit it ({editor + ' ' + str(path) if editor else 'in any editor'}), then: "
                  f"memlab challenge check {ch.id}")
            return 0
        return _check(ch, args.json)
    except (chl.ChallengeError, Refused) as e:
        raise UsageError(str(e)) from None


def _list(course, as_json: bool) -> int:
    from lab.course import challenges as chl
    from lab.course.progress import Progress
    from lab.course.reference import load_reference

    progress = Progress.load()
    rows = []
    for ch in chl.all_challenges(course):
        recorded = ch.solution_variant in load_reference(ch.lesson.id)
        rows.append({"id": ch.id, "title": ch.title, "lesson": ch.lesson.key,
                     "passed": chl.passed(progress, ch), "started": chl.copy_path(ch).is_file(),
                     "reference": "recorded on the H200" if recorded else "H200 recording pending"})
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        mark = "✔ passed" if r["passed"] else ("● started" if r["started"] else "○ not started")
        print(f"  {r['id']:<16} {mark:<14} {r['title']}  (lesson {r['lesson']}; solution "
              f"{r['reference']})")
    if not rows:
        print("no challenges in this course")
    return 0


def _check(ch, as_json: bool) -> int:
    from lab.course import challenges as chl
    from lab.course.progress import Progress

    def on_event(ev: dict) -> None:
        if ev.get("type") == "status" and not as_json:
            print(f"  … {ev.get('text', '')}", file=sys.stderr)

    if not chl.copy_path(ch).is_file():
        chl.check(ch, None)  # raises the one-line "not started" error
    if not as_json:
        print(f"checking {ch.id} in sim (seed scale"
              + (f", a {ch.gpu_memory / 2**30:g} GiB GPU" if ch.gpu_memory else "") + ") …",
              file=sys.stderr)
    from lab.runner.client import default_runner

    g = chl.check(ch, default_runner(), Progress.load(), on_event=on_event)
    if as_json:
        print(json.dumps(g.to_dict(), indent=2))
    else:
        for line in g.lines:
            print(f"  {'✔' if line.ok else '✗'} {line.text}")
        if g.error and not g.passed:
            print(f"  {g.error}")
        print(f"{'PASSED' if g.passed else 'not yet'}: {ch.title}")
    return 0 if g.passed else 1
