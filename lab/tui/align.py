"""Phase alignment: one x axis on which every variant is drawn at its *own* phases.

Variants of a lesson do different amounts of work per phase (checkpointing recomputes in
backward, an OOM stops in forward), so their event indices do not line up. The aligned axis
gives each phase — matched by name across variants, in order — a segment as wide as its
longest variant; a variant's event `e` of phase `p` is drawn at `segment(p).start + (e -
its own start of p)`. A variant that is shorter in a phase holds its level to the next
segment (memory holds its value), and a variant that never reached a phase is not drawn there.

Pure Python (no Textual, no plotext): the plot and the difference view both use it.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

Key = tuple[str, int]  # (phase name, occurrence): a name may repeat within one run


def phase_keys(starts: list[tuple[str, int]]) -> list[Key]:
    seen: dict[str, int] = {}
    keys = []
    for name, _ in starts:
        keys.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return keys


def merge_orders(orders: list[list[Key]]) -> list[Key]:
    """One order holding every key, each run's own order kept (first run wins ties)."""
    merged: list[Key] = []
    for order in orders:
        pos = 0
        for key in order:
            if key in merged:
                pos = max(pos, merged.index(key) + 1)
            else:
                merged.insert(pos, key)
                pos += 1
    return merged


@dataclass
class Segment:
    key: Key
    start: float  # on the aligned axis
    width: float

    @property
    def name(self) -> str:
        return self.key[0]


@dataclass
class Track:
    """One variant's phases: where each starts in its own events and on the aligned axis."""

    own_starts: list[int] = field(default_factory=list)  # event index where each phase starts
    axis_starts: list[float] = field(default_factory=list)

    def x(self, event: float) -> float:
        if not self.own_starts:
            return float(event)
        i = max(0, bisect_right(self.own_starts, event) - 1)
        return self.axis_starts[i] + (event - self.own_starts[i])


@dataclass
class Axis:
    segments: list[Segment]
    tracks: list[Track]
    end: float

    def x(self, series: int, event: float) -> float:
        return self.tracks[series].x(event)


def align(runs: list[tuple[list[tuple[str, int]], int, int]]) -> Axis:
    """runs: (phase_starts, first event, last event) per variant -> the aligned axis.

    Events before a run's first phase belong to a phase named "" (set-up outside any phase).
    """
    spans: list[list[tuple[Key, int, int]]] = []  # per run: (key, own start, own width)
    for starts, first, last in runs:
        starts = list(starts)
        if not starts or starts[0][1] > first:
            starts.insert(0, ("", first))
        keys = phase_keys(starts)
        run_spans = []
        for k, (key, (_, s)) in enumerate(zip(keys, starts)):
            end = starts[k + 1][1] if k + 1 < len(starts) else last + 1
            run_spans.append((key, s, max(0, end - s)))
        spans.append(run_spans)
    order = merge_orders([[key for key, _, _ in run] for run in spans])
    width = {key: 0 for key in order}
    for run in spans:
        for key, _, w in run:
            width[key] = max(width[key], w)
    segments, pos = [], 0.0
    for key in order:
        segments.append(Segment(key, pos, float(width[key])))
        pos += width[key]
    at = {seg.key: seg.start for seg in segments}
    tracks = [Track([s for _, s, _ in run], [at[key] for key, _, _ in run]) for run in spans]
    return Axis([s for s in segments if s.name or s.width], tracks, max(pos - 1, 0.0))


__all__ = ["Axis", "Segment", "Track", "align", "merge_orders", "phase_keys"]
