"""One table writer for the terminal and for Markdown.

    table(["variant", "peak"], [["baseline", "4.40 GB"]])                  -> aligned text
    table(["variant", "peak"], [["baseline", "4.40 GB"]], markdown=True)   -> a GitHub table

Columns are as wide as their widest cell: nothing is ever cut ("forwar", "byt" were). Columns of
numbers are right-aligned (found from the cells, or named with `right=`), text left-aligned.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from .units import DASH

# a cell that reads as a number with an optional unit and an optional note in parentheses:
# "4.40 GB", "+25%", "−800.00 kB (−40%)", "≥ 1,024", "×1.002", "366.6 ms", "#1,024"; not a
# path such as "01-linear/experiment.py:25"
_NUMERIC = re.compile(r"^[+\-−±≥≤<>~×≈#]?\s?<?[0-9][0-9,.]*(\s?[A-Za-zµ%/]+)?(\s\(.*\))?$")
_PLACEHOLDERS = {"", DASH, "-", "(baseline)", "n/a"}


def looks_numeric(cell: str) -> bool:
    return bool(_NUMERIC.match(cell.strip()))


def numeric_columns(rows: Sequence[Sequence[str]]) -> set[int]:
    """Columns where most real cells are numbers (placeholders such as '—' do not count); a
    status word among numbers ('OOM after 2.20 GB') keeps the column right-aligned."""
    out = set()
    for i, col in enumerate(zip(*rows)):
        cells = [c.strip() for c in col if c.strip() not in _PLACEHOLDERS]
        if cells and sum(looks_numeric(c) for c in cells) * 2 >= len(cells):
            out.add(i)
    return out


def _cells(rows: Iterable[Sequence[object]], n: int) -> list[list[str]]:
    out = []
    for r in rows:
        cells = ["" if c is None else str(c).replace("\n", " ") for c in r]
        out.append(cells + [""] * (n - len(cells)))
    return out


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], right: set[int] | None = None,
          markdown: bool = False) -> str:
    """Aligned plain text (header, a rule of '─', rows) or a Markdown table; never truncated."""
    headers = [str(h) for h in headers]
    body = _cells(rows, len(headers))
    right = numeric_columns(body) if right is None else set(right)
    if markdown:
        def esc(c: str) -> str:
            return c.replace("|", "\\|")

        sep = ["---:" if i in right else "---" for i in range(len(headers))]
        lines = [headers, sep] + body
        return "\n".join("| " + " | ".join(esc(c) if k != 1 else c for c in r) + " |"
                         for k, r in enumerate(lines))
    widths = [max(len(c) for c in col) for col in zip(headers, *body)]

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([fmt(headers), "  ".join("─" * w for w in widths)] + [fmt(r) for r in body])


def key_values(pairs: Iterable[tuple[str, object]]) -> str:
    """'name   value' lines, names padded to one width (doctor, the peak's categories)."""
    pairs = [(str(k), "" if v is None else str(v)) for k, v in pairs]
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k:<{width}}  {v}".rstrip() for k, v in pairs)


__all__ = ["key_values", "looks_numeric", "numeric_columns", "table"]
