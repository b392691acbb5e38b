"""`memlab view FILE`: read a memory snapshot (or a memlab result) in the terminal.

    memlab view dump_snapshot.pickle            peak, what was live there, phases, the timeline
    memlab view dump_snapshot.pickle --json     the same summary for scripts
    memlab view results.json --variant no_grad  a result saved by `memlab run --json`
    memlab view oom.pickle --cap 10GiB          an out-of-memory explained (fragmentation or
                                                shortage) and replayed under other allocator
                                                settings: would it have fit?
    memlab view huge.pickle --window 60s:90s    part of a huge trace, streamed in bounded memory
                                                (a pickle over 500 MB needs a window)

Pickles are loaded with a restricted unpickler: plain containers, numbers and strings only;
anything else is refused before it runs. The --json path imports neither plotext nor Textual.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from lab.commands import UsageError
from lab.report import axis_unit


def add_parser(sub) -> None:
    p = sub.add_parser("view", help="summarize a PyTorch memory snapshot or a memlab result")
    p.add_argument("file", help="a torch.cuda.memory._dump_snapshot() pickle, or a result JSON")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--app", action="store_true",
                   help="open the snapshot in the lab's viewer screen (timeline inspector)")
    p.add_argument("--device", type=int, metavar="N",
                   help="which GPU's trace (default: the one with the most entries)")
    p.add_argument("--variant", metavar="V", help="for a result list: only this variant")
    p.add_argument("--top", type=int, default=10, metavar="N",
                   help="rows in each table (and live allocations in --json; default 10)")
    p.add_argument("--no-timeline", action="store_true",
                   help="leave the downsampled timeline out of --json, the plot out of the text")
    p.add_argument("--cap", metavar="SIZE",
                   help="the memory cap the run had (set_per_process_memory_fraction), e.g. "
                        "10GiB: a snapshot does not record it")
    p.add_argument("--oom-message", metavar="TEXT",
                   help="the out-of-memory message PyTorch printed: its '… allowed' gives the cap")
    p.add_argument("--try", dest="tries", action="append", metavar="SETTING",
                   help="replay the out-of-memory under this PYTORCH_ALLOC_CONF (over the recorded "
                        "settings) instead of the usual candidates, e.g. max_split_size_mb:200 "
                        "(repeatable)")
    p.add_argument("--no-replay", action="store_true",
                   help="explain an out-of-memory without replaying it under other settings")
    p.add_argument("--window", metavar="START:END",
                   help="stream the pickle and summarize only this part of its trace: seconds "
                        "since the first entry (10s:20s, 1.5s:, :500ms) or entry numbers "
                        "(1000000:2000000), START included, END not. Memory follows the window, "
                        "not the file (~25 µs an entry to read); a pickle over 500 MB opens only "
                        "this way. The peak and what was live there are the window's; an "
                        "out-of-memory is not explained or replayed (that needs the whole trace)")
    p.set_defaults(func=main)


def main(args) -> int:
    from lab.snapshots import SnapshotError, open_summary

    if args.top < 1:
        raise UsageError("--top must be at least 1")
    if args.device is not None and args.device < 0:
        raise UsageError("--device must be 0 or more")
    cap = _cap(args.cap)
    tries = _tries(args.tries)
    window = _window(args.window)
    _hint_per_variant_files(args.file)
    try:
        summaries = open_summary(args.file, device=args.device, variant=args.variant,
                                 top=max(args.top, 20), window=window)
    except SnapshotError as e:
        raise UsageError(str(e)) from None
    if args.app:
        from lab.tui.screens.snapshot_view import SnapshotViewApp

        SnapshotViewApp(summaries[0]).run()
        return 0
    from lab.snapshots.oom import diagnose

    # a window's trace is a slice: the state at its out-of-memory cannot be rebuilt from it
    found = [(None, None) if s.window else
             diagnose(s, cap=cap, message=args.oom_message or "", replay=not args.no_replay,
                      settings=tries) for s in summaries]
    if args.json:
        dicts = [s.to_dict(timeline=not args.no_timeline) for s in summaries]
        for d, (x, r) in zip(dicts, found):
            d["live_at_peak"] = d["live_at_peak"][: args.top]
            if x is not None:
                d["oom_explained"] = x.to_dict()
            if r is not None:
                d["replay"] = r.to_dict()
        json.dump(dicts[0] if len(dicts) == 1 else dicts, sys.stdout, indent=1)
        print()  # `| head`: a closed pipe is handled once, in lab.cli
        return 0
    from lab.snapshots.oom_text import render_oom
    from lab.snapshots.text import render

    width = min(140, shutil.get_terminal_size((110, 30)).columns)
    for k, (s, (x, r)) in enumerate(zip(summaries, found)):
        if k:
            print("\n" + "═" * width + "\n")
        print(render(s, top=args.top, ooms=x is None))
        if x is not None:
            print()
            print(render_oom(s, x, r, top=args.top))
        if not args.no_timeline:
            print()
            print(timeline_text(s, width=width, color=sys.stdout.isatty()))
    return 0


def _tries(given: list[str] | None) -> list[str] | None:
    """--try's settings, each checked as the allocator model reads it."""
    if not given:
        return None
    from lab.measure.sim.allocator.settings import AllocatorSettingsError, parse_alloc_conf

    for conf in given:
        try:
            parse_alloc_conf(conf)
        except AllocatorSettingsError as e:
            raise UsageError(f"--try {conf!r}: {e}") from None
    return given


def _window(text: str | None):
    if text is None:
        return None
    from lab.snapshots.stream import WindowError, parse_window

    try:
        return parse_window(text)
    except WindowError as e:
        raise UsageError(str(e)) from None


def _cap(text: str | None) -> int | None:
    if text is None:
        return None
    from lab.report.units import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise UsageError(f"--cap: {e}") from None


def _hint_per_variant_files(path: str) -> None:
    """`memlab run 01 --snapshot p.pkl` with several variants writes p-<variant>.pkl: if p.pkl
    itself is missing and those exist, name them instead of a bare "no such file"."""
    p = Path(path).expanduser()
    if p.exists():
        return
    siblings = sorted(p.parent.glob(f"{p.stem}-*{p.suffix}")) if p.parent.is_dir() else []
    if siblings:
        names = ", ".join(str(s) for s in siblings)
        raise UsageError(f"{path}: no such file; `memlab run --snapshot {p.name}` with several "
                         f"variants wrote one file per variant: {names} (e.g. `memlab view "
                         f"{siblings[0]}`)")


def timeline_text(s, width: int = 110, height: int = 20, color: bool = False) -> str:
    """The allocated (and reserved) timeline as a plotext chart, peak and OOMs marked."""
    try:
        import plotext as plt
    except ImportError:
        return "(install plotext to see the timeline)"
    xs, ys = s.series(2 * width)
    if not xs:
        return "(no allocation history to plot)"
    scale_x = 1e6 if s.x_unit == "us" else 1.0
    from lab.snapshots.text import origin_us

    x0 = origin_us(s) if s.x_unit == "us" else 0

    def tx(v):
        return (v - x0) / scale_x

    unit, div = axis_unit(max(max(ys), s.reserved_peak_bytes or 0))

    plt.clear_figure()
    plt.plotsize(width, height)
    plt.theme("clear")
    plt.plot([tx(x) for x in xs], [y / div for y in ys], label="allocated")
    rx, ry = s.reserved_series()
    if rx:
        plt.plot([tx(x) for x in rx], [y / div for y in ry], label="reserved")
    if s.peak_time_us is not None:
        plt.scatter([tx(s.peak_time_us)], [s.peak_bytes / div], marker="x", label="peak")
    ooms = [o for o in s.ooms if o.time_us is not None]
    if ooms:
        plt.vline(tx(ooms[0].time_us))
    plt.title("allocated memory over time" + (" (OOM marked)" if ooms else ""))
    plt.xlabel("seconds since the first entry" if s.x_unit == "us" else "allocation #")
    plt.ylabel(unit)
    text = plt.build()
    return text if color else plt.uncolorize(text)
