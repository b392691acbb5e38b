"""Pure helpers of the timeline plots (no Textual, no plotext; downsampling is lab.report's): step
curves, what a plot of n columns draws (to tell when two curves coincide), phase labels
that are never cut, and the allocation an OOM message says did not fit."""

from __future__ import annotations

import re
from bisect import bisect_right

_TRIED = re.compile(r"Tried to allocate ([0-9.]+) ?(GiB|MiB|KiB|GB|MB|kB|B)\b")
_UNIT = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "GB": 1e9, "MB": 1e6, "kB": 1e3, "B": 1}
SHORT = {"forward": "fwd", "backward": "bwd", "input": "in", "zero_grad": "zero", "micro-batch": "mb",
         "optimizer": "opt"}


def tried_bytes(error: str | None) -> int | None:
    """The allocation an OOM message says did not fit ("Tried to allocate 1.53 GiB")."""
    m = _TRIED.search(error or "")
    return int(float(m.group(1)) * _UNIT[m.group(2)]) if m else None


def step_points(x: list, y: list) -> tuple[list[float], list[float]]:
    """Memory holds its value until the next event: draw steps, not slopes."""
    if not x:
        return [], []
    sx, sy = [float(x[0])], [float(y[0])]
    for i in range(1, len(x)):
        sx += [float(x[i]), float(x[i])]
        sy += [float(y[i - 1]), float(y[i])]
    return sx, sy


def envelope(xs: list[float], ys: list[int], lo: float, hi: float, n: int) -> list[tuple]:
    """(min, max) of a step curve over each of n equal columns of [lo, hi]: what a plot of
    n columns draws."""
    out, i = [], 0
    for c in range(n):
        a, b = lo + (hi - lo) * c / n, lo + (hi - lo) * (c + 1) / n
        while i + 1 < len(xs) and xs[i + 1] <= a:
            i += 1
        j, vals = i, [ys[i]]
        while j + 1 < len(xs) and xs[j + 1] < b:
            j += 1
            vals.append(ys[j])
        out.append((min(vals), max(vals)))
    return out


def coincide(ax: list[float], ay: list[int], bx: list[float], by: list[int], tol: float,
             columns: int = 200) -> bool:
    """Two step curves drawn on top of each other: the same extent, the same top, and in
    nine columns of ten the same lowest and highest level, within `tol`. (A recording keeps
    1000 of its thousands of events, picked per run, so a brief spike is kept in one run and
    dropped in the other: compare what is drawn, not the points.)"""
    if not ax or not bx or abs(ax[-1] - bx[-1]) > max(1.0, 0.01 * abs(ax[-1])):
        return False
    if abs(max(ay) - max(by)) > tol / 3:
        return False
    lo, hi = min(ax[0], bx[0]), max(ax[-1], bx[-1])
    ea, eb = envelope(ax, ay, lo, hi, columns), envelope(bx, by, lo, hi, columns)
    same = sum(abs(p[0] - q[0]) <= tol and abs(p[1] - q[1]) <= tol for p, q in zip(ea, eb))
    return same >= 0.9 * columns


def phase_label(name: str, room: int) -> str:
    """The phase's name if it fits, else a short form ('fwd 2'), else nothing: never cut."""
    if len(name) <= room:
        return name
    head, _, tail = name.partition(" ")
    if head not in SHORT:
        return ""
    short = SHORT[head] + (" " + tail if tail else "")
    return short if len(short) <= room else ""


__all__ = ["SHORT", "coincide", "envelope", "phase_label", "step_points",
           "tried_bytes"]
