"""Tables and lines that pick their layout by the width they are drawn at (80 columns is a first
class size): a column's header is abbreviated, then the least needed columns are dropped, and a
number is never wrapped.

    FitTable("Peak per variant", [Col("variant"), Col("peak", numeric=True),
                                  Col("step time", numeric=True, drop=1)], rows)
    Fit(long_text, short_text)          # the first that fits on the line(s) it has

Both are Rich renderables measured at render time (`__rich_console__` gets the width), so a
`Static` holding one re-fits on every resize without the widget knowing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text


@dataclass(frozen=True)
class Col:
    header: str
    justify: str = "left"
    numeric: bool = False  # never wrapped: a number reads whole or not at all
    short: str | None = None  # the header at narrow widths ("Δ vs baseline" -> "Δ")
    drop: int = 0  # 0: always kept; higher numbers are dropped first when the table is too wide
    wrap: bool = False  # prose that may wrap (a check's name, a phase) when nothing else fits
    key: bool = False  # repeated in every part when the table is split in two or more


WIDE = 10_000  # measure at this width: Rich clamps a measurement to the width it is given


def cell_plain(cell) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def natural_width(console: Console, options: ConsoleOptions, renderable) -> int:
    """How wide `renderable` wants to be, unwrapped (not clamped to the width at hand)."""
    return Measurement.get(console, options.update_width(WIDE), renderable).maximum


class Fit:
    """The first of `choices` whose natural width fits; the last one otherwise."""

    def __init__(self, *choices):
        self.choices = choices

    def pick(self, console: Console, options: ConsoleOptions):
        for choice in self.choices[:-1]:
            if natural_width(console, options, choice) <= options.max_width:
                return choice
        return self.choices[-1]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.pick(console, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.pick(console, options))


class FitTable:
    """A table of `columns` and `rows` (cells: str or Text) drawn at the width it gets."""

    def __init__(self, heading: str, columns: Sequence[Col], rows: Iterable[Sequence],
                 caption: str | None = None, notes: Text | None = None):
        self.heading, self.columns, self.rows = heading, list(columns), [list(r) for r in rows]
        self.caption, self.notes = caption, notes
        self._chosen: dict[int, list[Table]] = {}  # width -> the layout drawn there

    def table(self, keep: Sequence[int], short: bool, rows: list | None = None) -> Table:
        t = Table(header_style="bold", pad_edge=False, box=box.SIMPLE_HEAD)
        for i in keep:
            c = self.columns[i]
            # a prose column wraps at spaces, never inside a word: no narrower than its longest
            longest = max((len(w) for r in self.rows for w in cell_plain(r[i]).split()),
                          default=0) if c.wrap else None
            t.add_column((c.short or c.header) if short else c.header, justify=c.justify,
                         no_wrap=not c.wrap, overflow="fold" if c.wrap else "ellipsis",
                         min_width=longest)
        for row in self.rows if rows is None else rows:
            t.add_row(*(row[i] for i in keep))
        return t

    def squeezed(self, keep: Sequence[int], short: bool) -> Table:
        """The layout at its narrowest: each prose cell as its longest word (where it wraps to),
        every other cell whole. (Rich's own minimum takes a cell's longest word for a column
        that must not wrap too, and would then crop a number.)"""
        return self.table(keep, short, rows=[
            [max(cell_plain(cell).split(), key=len, default="") if c.wrap else cell
             for c, cell in zip(self.columns, r)] for r in self.rows])

    def specs(self) -> list[tuple[list[int], bool]]:
        """(columns kept, short headers) of every layout, widest first: all columns, short
        headers, then the columns of the highest `drop` gone, and so on."""
        keep = list(range(len(self.columns)))
        out = [(keep, False), (keep, True)]
        for level in sorted({c.drop for c in self.columns if c.drop}, reverse=True):
            keep = [i for i in keep if self.columns[i].drop != level]
            out.append((keep, True))
        return out

    def layouts(self) -> list[Table]:
        return [self.table(keep, short) for keep, short in self.specs()]

    def split(self, console: Console, options: ConsoleOptions) -> list[Table]:
        """Narrower than every layout: the columns in parts, the key columns in each (a part
        takes columns while it still fits, and at least one)."""
        kept = self.specs()[-1][0]
        keys = [i for i in kept if self.columns[i].key]
        parts: list[list[int]] = [[]]
        for i in (i for i in kept if not self.columns[i].key):
            trial = self.table(keys + parts[-1] + [i], True)
            if parts[-1] and natural_width(console, options, trial) > options.max_width:
                parts.append([])
            parts[-1].append(i)
        return [self.table(keys + p, True) for p in parts]

    def _tables(self, console: Console, options: ConsoleOptions) -> list[Table]:
        """The layout at this width (measured once a width: a screen redraws it often)."""
        if options.max_width not in self._chosen:
            self._chosen[options.max_width] = self._choose(console, options)
        return self._chosen[options.max_width]

    def _choose(self, console: Console, options: ConsoleOptions) -> list[Table]:
        layouts = self.layouts()
        for t in layouts:
            if natural_width(console, options, t) <= options.max_width:
                return [t]
        last = layouts[-1]
        if any(c.wrap for c in self.columns) and natural_width(
                console, options, self.squeezed(*self.specs()[-1])) <= options.max_width:
            return [last]  # the prose columns (a check's name) wrap; the numbers stay whole
        if any(c.key for c in self.columns):
            return self.split(console, options)
        return [layouts[-1]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        parts = [Text(self.heading, style="bold")] if self.heading else []
        parts += self._tables(console, options)
        if self.caption:  # below, as its own text: a Rich caption wraps to the table's width
            parts.append(Text(self.caption, style="dim"))
        if self.notes is not None:
            parts.append(self.notes)
        yield Group(*parts)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        tables = self._tables(console, options)
        widths = [Measurement.get(console, options, t) for t in tables]
        return Measurement(max(w.minimum for w in widths), max(w.maximum for w in widths))


__all__ = ["Col", "Fit", "FitTable"]
