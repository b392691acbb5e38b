"""Several ranks' snapshots side by side: `memlab diff rank0.pkl rank1.pkl rank2.pkl …`.

A distributed job writes one snapshot per rank (each process dumps its own GPU). The question is
"which rank is heavier, and by what": each rank at its own peak, by category and by allocation
site, the spread (the heaviest minus the lightest), the rank furthest from the others, then the
ordinary two-sided diff of the heaviest against the lightest (lab.snapshots.diff).

    r = rank_view(["rank0.pkl", "rank1.pkl", "rank2.pkl"])
    r.spread_bytes, r.heaviest, r.lightest, r.by_category["activations"]  # one value per rank
    r.pair                                                                  # a Diff

A rank's name is its file's rank number when the name holds one (`rank3`, `_r3`, `-3.pkl`), else
its file name.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from .diff import SCHEMA, Diff, Side, _sites, diff, load_side

_RANK = re.compile(r"(?:rank|_r|-r|\br)[_-]?(\d+)|[_-](\d+)(?=\.(?:pkl|pickle)(?:\.gz)?$)", re.I)


@dataclass
class RankView:
    sides: list[Side]
    spread_bytes: int  # the heaviest rank's peak minus the lightest's
    heaviest: int  # index into sides
    lightest: int
    outlier: int | None  # the rank furthest from the others' median, when it stands out (> 5 %)
    by_category: dict[str, list[int]] = field(default_factory=dict)  # category -> per rank
    top_sites: dict[str, list[int]] = field(default_factory=dict)  # site -> per rank
    pair: Diff | None = None  # the heaviest against the lightest
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        return {"schema": SCHEMA, "kind": "ranks", **d}


def rank_label(path: str | Path) -> str:
    name = Path(path).name
    m = _RANK.search(name)
    if m:
        return f"rank {m.group(1) or m.group(2)}"
    return name


def _spread_order(table: dict[str, list[int]]) -> dict[str, list[int]]:
    return dict(sorted(table.items(), key=lambda kv: (-(max(kv[1]) - min(kv[1])), kv[0])))


def rank_view(paths: list[str | Path], *, device: int | None = None, top: int = 10) -> RankView:
    """Raises SnapshotError (one line) for a file it cannot read."""
    sides = [load_side(p, device=device) for p in paths]
    labels = [rank_label(p) for p in paths]
    if len(set(labels)) < len(labels):  # two files name the same rank: use the file names
        labels = [str(p) for p in paths]
    for s, label in zip(sides, labels):
        s.label = label
    peaks = [s.peak_bytes for s in sides]
    hi, lo = peaks.index(max(peaks)), peaks.index(min(peaks))
    cats = {k: [s.by_category.get(k, 0) for s in sides]
            for k in sorted({k for s in sides for k in s.by_category})}
    short = not all(s.guessed for s in sides)
    per_rank = [_sites(s, short) for s in sides]
    sites = {w: [p.get(w, 0) for p in per_rank] for w in {w for p in per_rank for w in p}}
    sites = dict(list(_spread_order(sites).items())[:top])
    outlier = None
    if len(sides) >= 3:
        far = max(range(len(sides)),
                  key=lambda i: abs(peaks[i] - median(peaks[:i] + peaks[i + 1:])))
        rest = median(peaks[:far] + peaks[far + 1:])
        if rest and abs(peaks[far] - rest) / rest > 0.05:
            outlier = far
    notes = []
    if any(s.status != "ok" for s in sides):
        notes += [f"{s.label}: status {s.status}" for s in sides if s.status != "ok"]
    if len({s.source for s in sides}) > 1:
        notes.append("the files mix memlab results (tensor bytes) and memory snapshots "
                     "(allocator blocks)")
    pair = diff(sides[lo], sides[hi], top=top) if hi != lo else None
    return RankView(sides, peaks[hi] - peaks[lo], hi, lo, outlier, _spread_order(cats), sites,
                    pair, notes)


def dumps(r: RankView) -> str:
    return json.dumps(r.to_dict(), indent=1)


def render(r: RankView, top: int = 10) -> str:
    from lab.report import format_bytes, percent, table

    from .diff_text import render as render_diff

    labels = [s.label for s in r.sides]
    heavy, light = r.sides[r.heaviest], r.sides[r.lightest]
    frac = r.spread_bytes / light.peak_bytes if light.peak_bytes else None
    out = [f"{len(r.sides)} ranks, each at its own peak: {heavy.label} the heaviest "
           f"({format_bytes(heavy.peak_bytes)}), {light.label} the lightest "
           f"({format_bytes(light.peak_bytes)}); spread {format_bytes(r.spread_bytes)}"
           + (f" ({percent(frac, signed=False)})" if frac is not None else "")]
    if r.outlier is not None:
        out.append(f"{labels[r.outlier]} stands apart from the others (more than 5 % from "
                   "their median)")
    right = set(range(1, len(labels) + 2))

    def rows(d: dict[str, list[int]]) -> list[list[str]]:
        return [[k, *map(format_bytes, v), format_bytes(max(v) - min(v))] for k, v in d.items()]

    out += ["", table(["", *labels, "spread"],
                      [["peak", *(format_bytes(s.peak_bytes) for s in r.sides),
                        format_bytes(r.spread_bytes)], *rows(r.by_category)], right=right)]
    if r.top_sites:
        out += ["", f"allocation sites that differ most between ranks (top {len(r.top_sites)})",
                table(["where", *labels, "spread"], rows(r.top_sites), right=right)]
    for n in r.notes:
        out.append(f"note: {n}")
    if r.pair is not None:
        out += ["", f"── {heavy.label} against {light.label} " + "─" * 40, render_diff(r.pair, top)]
    return "\n".join(out)


__all__ = ["RankView", "dumps", "rank_label", "rank_view", "render"]
