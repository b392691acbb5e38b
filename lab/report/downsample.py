"""Downsampling a memory series for display, keeping every peak: ONE rule for the engine's stored
timelines, the snapshot viewer and the app's plots.

A plot `w` characters wide shows ~2·w points; drawing 50,000 costs ~0.6 s per redraw, and a
result keeps ~1,000. Split the series into equal buckets of consecutive points and keep, in each,
the first point holding its *maximum* (memory questions are about peaks) and, with `lows`, its
minimum too (the dip between two steps, so a stored timeline still reads step by step); the first
and the last point always stay, so the curve spans the whole window. `max()` and `.index()` on a
slice run in C: 1,000,000 points (a list or an `array`) shrink to 2,000 in milliseconds.

    peak_indices(ys, 200)                 indices to keep, ascending
    peak_indices(ys, 1000, lows=True)     maxima and minima (the engine's stored timeline)
    downsample(xs, ys, 200)               (xs, ys) thinned by the same rule

Headless and torch-free, like the rest of lab.report.
"""

from __future__ import annotations

from typing import Sequence


def peak_indices(ys: Sequence[float], points: int, lo: int = 0, hi: int | None = None,
                 lows: bool = False) -> list[int]:
    """Indices into `ys[lo:hi]` (ascending) of at most ~`points` points: every one when they are
    that few, else the first, the last and each bucket's maximum (and minimum with `lows`: then
    `points // 2` buckets, two points each)."""
    hi = len(ys) if hi is None else min(hi, len(ys))
    n = hi - lo
    if n <= 0:
        return []
    if n <= points or points < 2:
        return list(range(lo, hi))
    buckets = max(1, points // 2) if lows else points
    width = n / buckets
    keep = {lo, hi - 1}
    for b in range(buckets):
        a, z = lo + int(b * width), lo + int((b + 1) * width)
        if z > a:
            seg = ys[a:z]
            keep.add(a + seg.index(max(seg)))
            if lows:
                keep.add(a + seg.index(min(seg)))
    return sorted(keep)


def downsample(xs: Sequence, ys: Sequence, points: int) -> tuple[list, list]:
    """(xs, ys) at the indices `peak_indices` keeps."""
    idx = peak_indices(ys, points)
    return [xs[i] for i in idx], [ys[i] for i in idx]


__all__ = ["downsample", "peak_indices"]
