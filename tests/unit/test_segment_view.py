"""The segment view (lab/snapshots/segments.py) over memory_snapshot()-shaped segments."""

from lab.snapshots.segments import segment_view

MiB = 1 << 20


def seg(address, *blocks, expandable=False):
    return {"address": address, "total_size": sum(n for n, _ in blocks), "is_expandable": expandable,
            "blocks": [{"size": n, "state": "active_allocated" if live else "inactive"}
                       for n, live in blocks]}


def test_holes_are_free_blocks_beside_live_ones():
    view = segment_view([seg(0, (100 * MiB, True), (1948 * MiB, False)),  # a pinned big segment
                         seg(1 << 40, (2048 * MiB, False)),  # wholly free: empty_cache() frees it
                         seg(2 << 40, (20 * MiB, True), (40 * MiB, False), expandable=True)])
    assert view.holes_bytes == 1948 * MiB  # not the free segment, not the expandable one
    assert view.largest_free == 2048 * MiB and view.reserved == 4156 * MiB
    text = view.text(width=20)
    lines = text.splitlines()
    assert len(lines) == 4 and lines[0].count("█") == 1 and "1 live block, " in lines[0]
    assert "all free: empty_cache() can release it" in lines[1] and "expandable" in text
    assert lines[-1].startswith("3 segment(s)")


def test_many_segments_are_summed_after_the_limit():
    view = segment_view([seg(i, (MiB * (i + 1), True)) for i in range(20)])
    lines = view.text(limit=5).splitlines()
    assert len(lines) == 7 and "15 smaller segments" in lines[5]
