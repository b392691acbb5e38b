"""`CategoryBars`: what was live at each variant's peak, one stacked bar per variant.

Each bar is as long as its peak relative to the largest peak shown, split into the categories
in `CATEGORIES` order, each in its fixed colour; a legend names the categories present.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from lab.measure.result import RunResult
from lab.measure.trace import CATEGORIES

from lab.report import format_bytes

from ..look import category_color
from .fit import Col, Fit, FitTable

SHORT = {"parameters": "params", "gradients": "grads", "optimizer_state": "optim.",
         "activations": "activ.", "temporaries": "temps"}


def stacked_bar(by_category: dict[str, int], total: int, scale_max: int, width: int) -> Text:
    """A bar of `width * total / scale_max` cells, split by category (largest remainder)."""
    cells = round(width * total / scale_max) if scale_max > 0 else 0
    parts = [(c, by_category.get(c, 0)) for c in CATEGORIES if by_category.get(c, 0) > 0]
    text = Text()
    if not parts or cells <= 0:
        return text
    whole = sum(v for _, v in parts)
    exact = [cells * v / whole for _, v in parts]
    sizes = [int(e) for e in exact]
    for i in sorted(range(len(parts)), key=lambda i: exact[i] - sizes[i], reverse=True):
        if sum(sizes) >= cells:
            break
        sizes[i] += 1
    for (cat, _), n in zip(parts, sizes):
        text.append("█" * n, style=category_color(cat))
    return text


class CategoryBars(Static):
    DEFAULT_CSS = """
    CategoryBars { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes)
        self.rows: list[tuple[str, str, RunResult]] = []  # (label, colour, result)

    def set_results(self, rows: list[tuple[str, str, RunResult]]) -> None:
        self.rows = rows
        self.refresh(layout=True)
        self.update(self._renderable())

    def on_resize(self) -> None:
        self.update(self._renderable())

    def _renderable(self):
        rows = [(lbl, col, r) for lbl, col, r in self.rows if r.peak.bytes > 0]
        if not rows:
            return Text("No peak to show yet: run the experiment.", style="dim")
        label_w = max(len(lbl) for lbl, _, _ in rows)
        width = max(10, (self.size.width or 80) - label_w - 14)
        top = max(r.peak.bytes for _, _, r in rows)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, justify="right")
        present: list[str] = []
        for lbl, col, r in rows:
            cats = r.peak.by_category
            present += [c for c in CATEGORIES if cats.get(c, 0) > 0 and c not in present]
            grid.add_row(Text(lbl, style=f"bold {col}"), stacked_bar(cats, r.peak.bytes, top, width),
                         format_bytes(r.peak.bytes))
        legend = Text("  ")
        for c in (c for c in CATEGORIES if c in present):
            legend.append("■ ", style=category_color(c))
            legend.append(c.replace("_", " ") + "  ")
        cats = [c for c in CATEGORIES if c in present]
        # a column per bar where they fit; else a row per bar (many ranks: lesson 22), a
        # column per category, in parts if need be: a number is never wrapped
        detail = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
        detail.add_column("at the peak", no_wrap=True)
        for lbl, col, _ in rows:
            detail.add_column(lbl, justify="right", style=col, no_wrap=True)
        for c in cats:
            detail.add_row(Text(c.replace("_", " "), style=category_color(c)),
                           *[format_bytes(r.peak.by_category.get(c, 0)) for _, _, r in rows])
        turned = FitTable("", [Col("at the peak", key=True)] + [
            Col(c.replace("_", " "), "right", numeric=True, short=SHORT.get(c, c)) for c in cats],
            [[Text(lbl, style=f"bold {col}")] + [format_bytes(r.peak.by_category.get(c, 0)) for c in cats]
             for lbl, col, r in rows])
        return Group(grid, legend, Fit(detail, turned))
