"""`memlab diff A B`: where did the peak move between two runs?

    memlab diff assets/reference/mixed-precision/baseline.json assets/reference/mixed-precision/bf16.json
    memlab diff b16.pkl b2.pkl --json          two snapshots (anyone's _dump_snapshot, or --snapshot)
    memlab diff runs.json runs.json --variant baseline --variant no_grad   two results in one file
    memlab diff a.json b.pkl --app             the two side by side in the lab's diff screen
    memlab diff rank0.pkl rank1.pkl rank2.pkl  several ranks side by side (lab.snapshots.ranks)

Each side is a result (RunResult JSON) or a memory snapshot, compared at its own peak: the peak
difference, by category, by phase and by the top allocation sites. --json prints
`peak_delta_bytes`, `by_category_delta`, `by_phase_delta`, `top_sites` (and both sides).
"""

from __future__ import annotations

import sys

from lab.commands import UsageError


def add_parser(sub) -> None:
    p = sub.add_parser("diff", help="the peak difference between two results or snapshots, "
                                    "by category, phase and allocation site")
    p.add_argument("a", help="A: a result JSON (memlab run --json, --save, assets/reference) "
                             "or a memory snapshot (.pkl, .pickle, .pkl.gz)")
    p.add_argument("b", help="B: the same kinds; the difference is B − A")
    p.add_argument("more", nargs="*", metavar="C",
                   help="more files (one per rank): the ranks side by side, the spread between "
                        "them, then the heaviest against the lightest")
    p.add_argument("--json", action="store_true", help="print the difference as JSON")
    p.add_argument("--app", action="store_true", help="open the two side by side in the lab")
    p.add_argument("--variant", action="append", metavar="V",
                   help="which result of a file holding several (once: both sides; twice: A's "
                        "then B's)")
    p.add_argument("--device", type=int, metavar="N",
                   help="which GPU's trace in a snapshot (default: the one with most entries)")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="allocation sites (and phases) to show (default 10)")
    p.set_defaults(func=main)


def main(args) -> int:
    from lab.snapshots import SnapshotError
    from lab.snapshots.diff import diff_files, dumps

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.device is not None and args.device < 0:
        raise UsageError("--device must be 0 or more")
    variants = list(args.variant or [])
    if len(variants) > 2:
        raise UsageError("--variant: give it once (both sides) or twice (A's, then B's)")
    pair = (variants[0], variants[-1]) if variants else (None, None)
    if args.more:
        return _ranks(args, [args.a, args.b, *args.more])
    try:
        d = diff_files(args.a, args.b, variants=pair, device=args.device, top=args.top)
    except SnapshotError as e:
        raise UsageError(str(e)) from None
    if args.app:
        from lab.tui.screens.diff_view import DiffViewApp

        DiffViewApp(d).run()
        return 0
    if args.json:
        print(dumps(d))
        return 0
    from lab.snapshots.diff_text import render

    print(render(d, top=args.top))
    sys.stdout.flush()
    return 0


def _ranks(args, paths: list[str]) -> int:
    from lab.snapshots import SnapshotError
    from lab.snapshots.ranks import dumps, rank_view, render

    if args.variant:
        raise UsageError("--variant picks A's and B's result; with more than two files give "
                         "one result (or snapshot) per file")
    if args.app:
        raise UsageError("--app shows two files; with more than two, the rank view is text or "
                         "--json")
    try:
        r = rank_view(paths, device=args.device, top=args.top)
    except SnapshotError as e:
        raise UsageError(str(e)) from None
    print(dumps(r) if args.json else render(r, top=args.top))
    sys.stdout.flush()
    return 0
