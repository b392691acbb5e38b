"""`memlab export FILE --to DIR`: a saved run or comparison as JSON, Markdown and profile.pkl.

    memlab run 01 --json > run.json && memlab export run.json --to out/
    memlab compare mlp --json > cmp.json && memlab export cmp.json --to out/ --format md
"""

from __future__ import annotations

import sys

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a saved result or comparison as JSON, Markdown, "
                                      "profile.pkl")
    p.add_argument("file", help="JSON from `memlab run --json` or `memlab compare --json`")
    p.add_argument("--to", required=True, metavar="DIR", help="the folder to write into")
    p.add_argument("--format", default="json,md,profile", metavar="LIST",
                   help="comma-separated: json, md, profile (default: all three)")
    p.add_argument("--title", help="the Markdown report's title")
    p.set_defaults(func=main)


def main(args) -> int:
    from lab.export import FORMATS, ExportError, export, load

    formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"--format: {', '.join(bad) or 'nothing'} is not one of "
                         f"{', '.join(FORMATS)}")
    try:
        obj = load(args.file)
        written = export(obj, args.to, formats, title=args.title)
    except ExportError as e:
        raise UsageError(str(e)) from None
    for p in written:
        print(p)
    if not written:
        print("nothing to write (no profile.pkl in these results)", file=sys.stderr)
    return 0
