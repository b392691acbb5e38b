"""Colours and plot ticks, the same on every screen: the TUI's styling, never its numbers.

One fixed colour per memory category and per variant position (the baseline is always the
first colour), as RGB so plotext and Rich draw exactly the same hue. Every number on screen is
written by lab.report (units, rows, provenance: one display policy for the app, the CLI and the
exports); tests/unit/test_display_policy.py keeps lab.tui from formatting one itself.
"""

from __future__ import annotations

import math

from lab.measure.trace import CATEGORIES
from lab.report.rows import STATUS_LABEL

Rgb = tuple[int, int, int]

CATEGORY_RGB: dict[str, Rgb] = {
    "parameters": (78, 121, 167),  # blue
    "gradients": (242, 142, 43),  # orange
    "optimizer_state": (176, 122, 161),  # purple
    "activations": (225, 87, 89),  # red
    "temporaries": (237, 201, 72),  # yellow
    "inputs": (89, 161, 79),  # green
    "other": (156, 156, 156),  # grey
}
assert set(CATEGORY_RGB) == set(CATEGORIES)

VARIANT_RGB: tuple[Rgb, ...] = (
    (0, 180, 216),  # baseline: cyan
    (255, 111, 145),  # pink
    (255, 199, 95),  # gold
    (132, 94, 194),  # violet
    (0, 201, 167),  # mint
    (255, 150, 80),  # tangerine
)
PHASE_RGB: Rgb = (120, 120, 120)
CURSOR_RGB: Rgb = (230, 0, 230)

STATUS_STYLE = {"ok": "green", "oom": "bold red", "error": "bold red", "timeout": "yellow",
                "cancelled": "yellow"}


def hex_of(rgb: Rgb) -> str:
    return "#" + bytes(rgb).hex()


def category_color(category: str) -> str:
    return hex_of(CATEGORY_RGB.get(category, CATEGORY_RGB["other"]))


def variant_rgb(index: int) -> Rgb:
    return VARIANT_RGB[index % len(VARIANT_RGB)]


def variant_color(index: int) -> str:
    return hex_of(variant_rgb(index))


def nice_ticks(top: float, n: int = 5) -> list[float]:
    """Round tick values from 0 to just above `top` (GB), at most n intervals, least headroom."""
    if top <= 0:
        return [0.0]
    n = max(1, n)
    mag = 10 ** math.floor(math.log10(top / n))
    best = None
    for m in (1, 2, 2.5, 5, 10, 20):
        step = m * mag
        count = math.ceil(top / step - 1e-9)
        if 1 <= count <= n and (best is None or count * step < best[0] * best[1]):
            best = (count, step)
    count, step = best or (1, top)
    return [round(i * step, 12) for i in range(count + 1)]


def int_ticks(lo: int, hi: int, n: int = 5) -> list[int]:
    """About n round integer ticks covering [lo, hi]."""
    span = max(1, hi - lo)
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = max(1, int(next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)))
    first = (lo + step - 1) // step * step
    return list(range(first, hi + 1, step))
