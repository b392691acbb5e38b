"""`memlab list`: the lessons, their variants, and any lesson that failed to load."""

from __future__ import annotations

import json
import sys

from lab.course.curriculum import load_course


def add_parser(sub) -> None:
    p = sub.add_parser("list", help="list the lessons")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def main(args) -> int:
    course = load_course()
    if args.json:
        print(json.dumps([{"number": l.key, "id": l.id, "title": l.title,
                           "part": (course.part_of(l).title if course.part_of(l) else None),
                           "variants": [v.name for v in l.variants], "modes": list(l.modes)}
                          for l in course.lessons], indent=2))
    else:
        print(course.title)
        part = None
        for l in course.lessons:
            if course.part_of(l) is not part:
                part = course.part_of(l)
                print(f"\n{part.title if part else 'More'}")
            print(f"  {l.key}  {l.id:<24} {l.title}")
            print(f"      variants: {', '.join(v.name for v in l.variants)}")
    for err in course.errors:
        print(f"memlab: warning: {err}", file=sys.stderr)
    return 0
