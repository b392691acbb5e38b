"""A snapshot summary as plain text: tables a terminal (or a Markdown code block) shows as-is.

No plotting here (this package stays headless); `lab.commands.view` adds the plotext timeline.
"""

from __future__ import annotations

from lab.report import format_bytes, table

from .summary import SnapshotSummary

# lab.tui still imports this name; the `app` branch moves it to lab.report.format_bytes. Sizes
# follow the one unit policy (GB = 10**9, stepping down); PyTorch's own OOM text is quoted as is.
gib = format_bytes


def when(s: SnapshotSummary, x: int | None) -> str:
    if x is None:  # a snapshot: allocated before history was recorded; a result: not kept
        return "before recording" if s.source == "pytorch-snapshot" else "—"
    if s.x_unit == "us":
        return f"{(x - origin_us(s)) / 1e6:,.3f} s"
    return f"#{x:,}"


def origin_us(s: SnapshotSummary) -> int:
    """Where times count from: the trace's first entry (a --window's too, so it can be narrowed)."""
    if s.window and s.window.get("trace_start_us") is not None:
        return s.window["trace_start_us"]
    return s.start_us


def _frame_line(f: dict) -> str:
    from .frames import label

    return label(f)


def render(s: SnapshotSummary, top: int = 10, frames: int = 6, ooms: bool = True) -> str:
    """The summary; `ooms=False` when the out-of-memory is explained apart (lab.snapshots.oom_text)."""
    out: list[str] = []
    what = {"pytorch-snapshot": "PyTorch memory snapshot", "memlab-result": "memlab result"}
    head = f"{s.file or '(snapshot)'} — {what.get(s.source, s.source)}"
    if s.title:
        head += f" · {s.title}"
    if s.source == "pytorch-snapshot":
        stacks = {"python": "Python stacks", "python+c++": "Python + C++ stacks",
                  "none": "no stacks"}[s.stacks]
        devs = ", ".join(f"{d}: {n:,}" for d, n in s.devices.items()) or "none"
        head += f" · device {s.device} · {s.events:,} trace entries · {stacks} (entries per device: {devs})"
    else:
        head += f" · {s.events:,} allocation events"
    out.append(head)
    if s.source == "pytorch-snapshot" and s.events and s.window:
        w = s.window
        out.append(f"window {w['window']}: entries {w['first_entry']:,} to "
                   f"{w['first_entry'] + w['entries'] - 1:,} of {w['of']:,}, "
                   f"{when(s, s.start_us)} to {when(s, s.end_us)} (streamed) · allocated when it "
                   f"opens {format_bytes(s.start_bytes)}, when it closes "
                   f"{format_bytes(s.end_bytes)} · reserved: peak "
                   f"{format_bytes(s.reserved_peak_bytes)}, end {format_bytes(s.reserved_end_bytes)}")
    elif s.source == "pytorch-snapshot" and s.events:
        span = when(s, s.end_us)
        out.append(f"recorded span {span} · allocated at the start {format_bytes(s.start_bytes)}, at the "
                   f"end {format_bytes(s.end_bytes)} · reserved: peak {format_bytes(s.reserved_peak_bytes)}, end "
                   f"{format_bytes(s.reserved_end_bytes)}")
    if s.extras is not None:  # what newer snapshots record: settings, compile contexts, ...
        out.extend(s.extras.lines())
    guess = " (guess from the stack)" if s.guessed else ""
    first = s.window["first_entry"] if s.window else 0  # entry numbers: the whole trace's
    out.append("")
    out.append(f"peak {format_bytes(s.peak_bytes)} allocated ({s.peak_bytes:,} B) at "
               f"{when(s, s.peak_time_us)}" + (f", entry #{s.peak_index + first:,}" if s.peak_index >= 0
                                               and s.x_unit == "us" else "")
               + f" · phase{guess}: {s.peak_phase or '—'}")
    if s.peak_where:
        out.append(f"  the allocation that made it: {s.peak_where}")
        for f in s.peak_frames[:frames]:
            out.append(f"      {_frame_line(f)}")
    if s.groups:
        total = s.peak_bytes or 1
        out.append("")
        out.append(f"live at the peak: {s.live_count:,} blocks — grouped by first user frame")
        rows = [[g["where"], format_bytes(g["bytes"]), f"{g['count']:,}", f"{g['bytes'] / total:.0%}"]
                for g in s.groups[:top]]
        out.append(table(["where", "bytes", "blocks", "share"], rows, right={1, 2, 3}))
    if s.by_phase:
        out.append("")
        out.append(f"by phase{guess}: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in s.by_phase.items()))
    if s.by_category:
        label = "by category (guessed from stacks and lifetimes)" if s.guessed else "by category"
        out.append(f"{label}: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in s.by_category.items()))
    if s.live_at_peak:
        out.append("")
        out.append("largest blocks live at the peak")
        rows = [[format_bytes(a.bytes), when(s, a.time_us), a.phase, a.category, a.where]
                for a in s.live_at_peak[:top]]
        out.append(table(["bytes", "allocated", "phase", "category", "where"], rows,
                         right={0, 1}))
    if s.ooms and ooms:
        out.append("")
        out.append(f"out-of-memory events: {len(s.ooms)}")
        for o in s.ooms[:top]:
            free = f", {format_bytes(o.device_free_bytes)} free on the device" \
                if o.device_free_bytes is not None else ""
            msg = o.message or f"requested {format_bytes(o.requested_bytes)}{free}"
            out.append(f"  at {when(s, o.time_us)}: {msg} — {o.where}")
    if len(s.bands) > 1:
        out.append("")
        out.append("phases along the run" + (" (guessed from sampled stacks)" if guess else "") + ":")
        shown = s.bands[:12]
        out.append("  " + " → ".join(f"{b.name} {when(s, b.start_us)}" for b in shown)
                   + (f" … ({len(s.bands)} changes in all)" if len(s.bands) > len(shown) else ""))
    for n in s.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


__all__ = ["gib", "render", "when"]
