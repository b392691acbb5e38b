"""`memlab export FILE --to DIR`: a saved run or comparison as JSON, Markdown and profile.pkl.

    memlab run 01 --json > result.json && memlab export result.json --to out/
    memlab compare mlp --json > cmp.json && memlab export cmp.json --to out/ --format md
    memlab export assets/reference/linear-baseline/baseline.json --to out/   (an H200 recording)

Writes DIR/result.json, DIR/report.md and the memory snapshots the results name (profile.pkl,
or profile-<variant>.pkl for several) — the same names as `memlab compare --export`. When there
is no snapshot to write, it says why.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("export", help="write a saved result or comparison as JSON, Markdown, "
                                      "profile.pkl")
    p.add_argument("file", help="JSON from `memlab run --json` or `memlab compare --json`, "
                                "or a recording in assets/reference")
    p.add_argument("--to", required=True, metavar="DIR",
                   help="the folder to write into (created): result.json, report.md, profile.pkl")
    p.add_argument("--format", default="json,md,profile", metavar="LIST",
                   help="comma-separated: json, md, profile (default: all three)")
    p.add_argument("--title", help="the Markdown report's title")
    p.set_defaults(func=main)


def is_recording(path: str | Path) -> bool:
    """A file under assets/reference: numbers recorded on the H200, not the learner's."""
    from lab.course.reference import REFERENCE_DIR

    try:
        Path(path).expanduser().resolve().relative_to(REFERENCE_DIR.resolve())
        return True
    except ValueError:
        return False


def main(args) -> int:
    from lab import text_plots
    from lab.report.export import FORMATS, ExportError, export, load, profile_note

    formats = tuple(f.strip() for f in args.format.split(",") if f.strip())
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise UsageError(f"--format: {', '.join(bad) or 'nothing'} is not one of "
                         f"{', '.join(FORMATS)}")
    try:
        obj = load(args.file)
        written = export(obj, args.to, formats, title=args.title,
                         recorded=is_recording(args.file), plots=text_plots)
    except ExportError as e:
        raise UsageError(str(e)) from None
    for p in written:
        print(p)
    note = profile_note(obj) if "profile" in formats else None
    if note:
        print(f"memlab: {note}", file=sys.stderr)
    return 0
