"""The segment view: what the caching allocator holds, one row per segment, holes visible.

Input is the list `torch.cuda.memory_snapshot()` returns (or `torch.cuda.memory._snapshot()
["segments"]`, or the allocator model's, lab.measure.sim.allocator.view): segments with their
blocks in address order, each block `active_allocated` or free. A *hole* is a free block in a
segment that also holds a live block: reserved memory that no larger request can use and that
`empty_cache()` cannot give back (what `inactive_split_bytes` counts).

    view = segment_view(torch.cuda.memory_snapshot())
    view.holes_bytes, view.largest_free, print(view.text(width=60))

Torch-free and Textual-free: the CLI, the lessons' experiments and the app all draw it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lab.measure.snapshot_format import ACTIVE_ALLOCATED

LIVE, FREE = "█", "░"
LEGEND = f"{LIVE} live {FREE} free"


@dataclass(frozen=True)
class SegmentRow:
    address: int
    total: int
    live: int  # bytes in live blocks
    blocks: tuple[tuple[int, bool], ...]  # (size, live) in address order
    expandable: bool = False

    @property
    def free(self) -> int:
        return self.total - self.live

    @property
    def holes(self) -> int:
        """Free bytes of a segment that also holds a live block (0 for a wholly free one)."""
        return self.free if self.live else 0

    @property
    def largest_free(self) -> int:
        return max((n for n, live in self.blocks if not live), default=0)

    def bar(self, width: int) -> str:
        """`width` cells, each showing whether most of its bytes are live."""
        if self.total <= 0 or width <= 0:
            return ""
        cells, edges, pos = [], [], 0
        for n, live in self.blocks:
            edges.append((pos, pos + n, live))
            pos += n
        for c in range(width):
            lo, hi = self.total * c / width, self.total * (c + 1) / width
            live = sum(max(0.0, min(hi, b) - max(lo, a)) for a, b, is_live in edges if is_live)
            cells.append(LIVE if live * 2 >= hi - lo else FREE)
        return "".join(cells)


@dataclass(frozen=True)
class SegmentView:
    rows: tuple[SegmentRow, ...] = field(default_factory=tuple)

    @property
    def reserved(self) -> int:
        return sum(r.total for r in self.rows)

    @property
    def live(self) -> int:
        return sum(r.live for r in self.rows)

    @property
    def holes_bytes(self) -> int:
        return sum(r.holes for r in self.rows if not r.expandable)

    @property
    def largest_free(self) -> int:
        return max((r.largest_free for r in self.rows), default=0)

    def text(self, width: int = 48, limit: int = 12, size=None) -> str:
        """One line per segment (the largest `limit`), then a summary line."""
        fmt = size or _gb
        rows = sorted(self.rows, key=lambda r: -r.total)
        lines = [f"{fmt(r.total):>9} {r.bar(width)} {_describe(r, fmt)}" for r in rows[:limit]]
        if len(rows) > limit:
            rest = rows[limit:]
            lines.append(f"{'':>9} … {len(rest)} smaller segments, {fmt(sum(r.total for r in rest))}")
        lines.append(f"{len(rows)} segment(s), {fmt(self.reserved)} reserved: {fmt(self.live)} live, "
                     f"{fmt(self.holes_bytes)} in holes, largest free block {fmt(self.largest_free)}")
        return "\n".join(lines)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _describe(r: SegmentRow, fmt) -> str:
    kind = "expandable, " if r.expandable else ""
    n_live = sum(1 for _, live in r.blocks if live)
    if not r.live:
        return f"{kind}all free: empty_cache() can release it"
    live = f"{n_live} live block{'s' * (n_live != 1)}"
    return f"{kind}{live}, {fmt(r.holes)} free beside" if r.holes else f"{kind}{live}"


def segment_view(segments: list[dict], device: int | None = None) -> SegmentView:
    rows = []
    for s in segments:
        if device is not None and s.get("device", device) != device:
            continue
        blocks = tuple((int(b["size"]), b.get("state") == ACTIVE_ALLOCATED) for b in s["blocks"])
        live = sum(n for n, is_live in blocks if is_live)
        rows.append(SegmentRow(int(s.get("address", 0)), int(s.get("total_size", sum(n for n, _ in blocks))),
                               live, blocks, bool(s.get("is_expandable"))))
    return SegmentView(tuple(rows))


__all__ = ["LEGEND", "SegmentRow", "SegmentView", "segment_view"]
