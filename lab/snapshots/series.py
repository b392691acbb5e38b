"""A snapshot's long memory series, windowed and downsampled for a plot of a given width.

The rule that keeps every peak is lab.report.downsample's (the one for stored timelines, this
viewer and the app's plots); this module only picks the window of x the plot shows.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from typing import Sequence

from lab.report.downsample import peak_indices


def window(xs: Sequence[int], x_lo: float | None, x_hi: float | None) -> tuple[int, int]:
    """Index range [lo, hi) of the points whose x lies in [x_lo, x_hi] (xs ascending)."""
    lo = 0 if x_lo is None else bisect_left(xs, x_lo)
    hi = len(xs) if x_hi is None else bisect_right(xs, x_hi)
    return lo, hi


def downsample(xs: Sequence[int], ys: Sequence[int], buckets: int,
               x_lo: float | None = None, x_hi: float | None = None) -> tuple[list, list]:
    lo, hi = window(xs, x_lo, x_hi)
    idx = peak_indices(ys, buckets, lo, hi)
    return [xs[i] for i in idx], [ys[i] for i in idx]


def int_array(values=()) -> array:
    return array("q", values)


__all__ = ["downsample", "int_array", "window"]
