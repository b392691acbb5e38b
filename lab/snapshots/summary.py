"""A memory snapshot, summarized: the allocated/reserved timeline, the peak and what was live there.

Input: the dict `torch.cuda.memory._snapshot()` returns (what `_dump_snapshot` pickles):

  segments        the allocator's state when the snapshot was taken: each segment (one
                  cudaMalloc) with its blocks (`state` active_allocated / active_pending_free /
                  inactive, `size`, `frames`)
  device_traces   one list per device of what the allocator did while history was recorded:
                  `action` alloc / free_requested / free_completed / segment_alloc /
                  segment_free / segment_map / segment_unmap / oom / snapshot, with `addr`,
                  `size`, `stream`, `time_us` and `frames`

Allocated bytes rise at `alloc` and fall at `free_completed` (as pytorch.org/memory_viz draws
them); reserved bytes follow the segment events. The trace may begin after the program started
(or the ring buffer of `max_entries` dropped its start), so what was allocated *before* the first
entry is recovered from the final state: allocated at the end (active blocks in `segments`)
minus the net change over the trace. Blocks allocated before recording and still live at the
peak are found too (freed after the peak without an alloc in the trace, or still active at the
end), so `live_at_peak` adds up to the peak.

Two passes over the entries, no per-entry objects: 1,000,000 entries summarize in well under a
second (bench/snapshot_open.py). Stacks are looked at only where it matters: the peak, what was
live there, OOMs, and an even sample of the trace for the phase bands.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import Counter
from itertools import accumulate, compress, islice, repeat
from operator import itemgetter, mul
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from lab.report.downsample import peak_indices

from . import frames as fr
from .extras import read_extras
from .lifetimes import Lifetimes
from .series import downsample

SCHEMA = 1
from lab.measure.snapshot_format import (ACTIVE_STATES, ALLOC, FREE, OOM, SEGMENT_DOWN,
                                         SEGMENT_UP)
TOP_N = 20
MAX_GROUPS = 30
PHASE_SAMPLES = 600
MAX_FRAMES_OUT = 30
_COMMON = frozenset((ALLOC, FREE, "free_requested"))


_SIGN = {ALLOC: 1, FREE: -1}


def _indices(seq: list, value) -> list[int]:
    """Every index of `value` in `seq`: list.index scans in C, so rare values cost little."""
    out, i = [], -1
    try:
        while True:
            i = seq.index(value, i + 1)
            out.append(i)
    except ValueError:
        return out




@dataclass
class Allocation:
    """A block live at the peak."""

    bytes: int
    where: str  # the grouping key: 'file.py:12 fn' of the first user frame
    phase: str  # best guess, from its stack (or the lab's own phase for a lab result)
    category: str  # best guess from the phase (or the lab's own category)
    time_us: int | None = None  # when it was allocated (None: before recording began)
    index: int | None = None  # its alloc entry in the trace
    frames: list[dict] = field(default_factory=list)
    note: str = ""


@dataclass
class Oom:
    index: int
    time_us: int | None
    requested_bytes: int
    device_free_bytes: int | None
    where: str
    message: str = ""


@dataclass
class Band:
    name: str
    start_us: int
    end_us: int


@dataclass
class Series:
    t_us: list[int] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)


@dataclass
class LiveAt:
    """What was live just after one trace entry (an out-of-memory): by category, by stack."""

    index: int
    bytes: int = 0
    count: int = 0
    by_category: dict[str, int] = field(default_factory=dict)
    by_phase: dict[str, int] = field(default_factory=dict)
    groups: list[dict] = field(default_factory=list)  # {where, bytes, count}
    top: list[Allocation] = field(default_factory=list)


@dataclass
class SnapshotSummary:
    source: str  # "pytorch-snapshot" | "memlab-result"
    file: str = ""
    device: int = 0
    devices: dict[int, int] = field(default_factory=dict)  # device -> trace entries
    events: int = 0
    actions: dict[str, int] = field(default_factory=dict)
    stacks: str = "none"  # "python" | "python+c++" | "none"
    guessed: bool = True  # phases/categories guessed from stacks (False: recorded by memlab)
    x_unit: str = "us"  # "us" (time_us) | "event" (no times in the trace)
    start_us: int = 0
    end_us: int = 0
    start_bytes: int = 0  # allocated before the first trace entry
    end_bytes: int = 0
    peak_bytes: int = 0
    peak_index: int = -1
    peak_time_us: int | None = None
    peak_where: str = ""
    peak_phase: str = ""
    peak_frames: list[dict] = field(default_factory=list)
    reserved_peak_bytes: int | None = None
    reserved_end_bytes: int | None = None
    live_count: int = 0
    live_bytes: int = 0  # all blocks live at the peak (= peak_bytes when the file is consistent)
    live_at_peak: list[Allocation] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)  # {where, bytes, count}
    by_phase: dict[str, int] = field(default_factory=dict)
    by_category: dict[str, int] = field(default_factory=dict)
    ooms: list[Oom] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    timeline: Series = field(default_factory=Series)
    reserved: Series = field(default_factory=Series)
    notes: list[str] = field(default_factory=list)
    title: str = ""
    at_oom: LiveAt | None = None  # what was live at the (last) out-of-memory
    extras: Any = None  # lab.snapshots.extras.Extras: what newer snapshots record (None: a result)
    # a --window's part of the trace (lab.snapshots.stream): {window, first_entry, entries, of}
    window: dict | None = None
    # full resolution, for the viewer (zoom, inspector); never serialized
    _t: Any = field(default=None, repr=False)  # array('q'): x of every entry
    _alloc: Any = field(default=None, repr=False)  # array('q'): allocated after every entry
    _entries: Any = field(default=None, repr=False)  # the raw trace entries
    _base: int = field(default=0, repr=False)  # allocated before the trace; add to _alloc
    _points: int = field(default=0, repr=False)  # timeline size for to_dict, built lazily
    _raw: Any = field(default=None, repr=False)  # the snapshot dict (segments, settings, ...)

    # ---- for viewers ---------------------------------------------------------------------------
    def xs(self):
        return self._t if self._t is not None else self.timeline.t_us

    def ys(self):
        return self._alloc if self._alloc is not None else self.timeline.bytes

    def series(self, buckets: int, x_lo: float | None = None, x_hi: float | None = None
               ) -> tuple[list, list]:
        """The allocated series for a plot `buckets` points wide (max per bucket kept)."""
        xs, ys = downsample(self.xs(), self.ys(), buckets, x_lo, x_hi)
        if self._alloc is not None and self._base:
            ys = [y + self._base for y in ys]
        return xs, ys

    def reserved_series(self, x_lo: float | None = None, x_hi: float | None = None
                        ) -> tuple[list, list]:
        xs, ys = self.reserved.t_us, self.reserved.bytes
        if x_lo is None and x_hi is None:
            return list(xs), list(ys)
        lo = max(0, bisect_right(xs, x_lo) - 1) if x_lo is not None else 0
        hi = bisect_right(xs, x_hi) if x_hi is not None else len(xs)
        return list(xs[lo:hi]), list(ys[lo:hi])

    def entry_near(self, x: float) -> int:
        """Index of the last entry at or before x (-1 if none)."""
        xs = self.xs()
        return bisect_right(xs, x) - 1 if len(xs) else -1

    def entry(self, index: int) -> dict | None:
        if self._entries is None or not 0 <= index < len(self._entries):
            return None
        return self._entries[index]

    def allocated_at(self, index: int) -> int:
        ys = self.ys()
        if not 0 <= index < len(ys):
            return self.start_bytes
        return ys[index] + (self._base if self._alloc is not None else 0)

    def band_at(self, x: float) -> str:
        for b in self.bands:
            if b.start_us <= x <= b.end_us:
                return b.name
        return ""

    def fill_timeline(self) -> Series:
        if self._points and not self.timeline.t_us and self._alloc is not None:
            idx = peak_indices(self._alloc, self._points)
            self.timeline = Series([self._t[i] for i in idx],
                                   [self._alloc[i] + self._base for i in idx])
        return self.timeline

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        if timeline:
            self.fill_timeline()
        # field by field: asdict(self) would deep-copy the million raw entries too
        d = {f.name: _plain(getattr(self, f.name)) for f in fields(self)
             if not f.name.startswith("_")}
        peak = {"bytes": d.pop("peak_bytes"), "time_us": d.pop("peak_time_us"),
                "index": d.pop("peak_index"), "where": d.pop("peak_where"),
                "phase": d.pop("peak_phase"), "frames": d.pop("peak_frames"),
                "by_phase": d.pop("by_phase"), "by_category": d.pop("by_category")}
        d["devices"] = {str(k): v for k, v in d["devices"].items()}
        if not timeline:
            d.pop("timeline"), d.pop("reserved")
        return {"schema": SCHEMA, "kind": "snapshot-summary", "events": d.pop("events"),
                "peak": peak, "live_at_peak": d.pop("live_at_peak"), **d}


def _plain(v: Any) -> Any:
    if is_dataclass(v):
        return asdict(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


# ---- PyTorch snapshots ---------------------------------------------------------------------------
def _pick_device(traces: list, segments: list, device: int | None) -> int:
    if device is not None:
        return device
    if any(traces):
        return max(range(len(traces)), key=lambda i: len(traces[i] or ()))
    devs = sorted({s.get("device", 0) for s in segments if isinstance(s, dict)})
    return devs[0] if devs else 0


def _final_blocks(segments: list, device: int) -> tuple[bool, int, int, list[tuple[int, dict]]]:
    """(has block states, allocated bytes, reserved bytes, [(addr, block)] active) at the end."""
    has_state, allocated, reserved, active = False, 0, 0, []
    for seg in segments:
        if not isinstance(seg, dict) or seg.get("device", 0) != device:
            continue
        reserved += int(seg.get("total_size", 0) or 0)
        addr = seg.get("address", 0) or 0
        for b in seg.get("blocks") or ():
            size = int(b.get("size", 0) or 0)
            state = b.get("state")
            if state is not None:
                has_state = True
            if state in ACTIVE_STATES:
                allocated += size
                active.append((b.get("address", addr), b))
            addr += size
    return has_state, allocated, reserved, active


def _block_frames(b: dict) -> list[dict]:
    frames = b.get("frames")
    if frames is None and b.get("history"):  # torch 2.0: frames live in the block's history
        frames = b["history"][0].get("frames")
    return list(frames or [])


def _stacks_kind(entries: list, segments: list) -> str:
    seen = 0
    cpp = False
    for e in entries:
        f = e.get("frames")
        if f:
            seen += 1
            cpp = cpp or fr.has_cpp(f)
            if seen >= 64:
                break
    if not seen:
        for seg in segments[:64]:
            for b in (seg.get("blocks") or ())[:8] if isinstance(seg, dict) else ():
                f = _block_frames(b)
                if f:
                    seen += 1
                    cpp = cpp or fr.has_cpp(f)
    return "none" if not seen else ("python+c++" if cpp else "python")


def _frames_out(frames: list[dict]) -> list[dict]:
    """Frames for JSON: the Python ones when there are any (C++ stacks run to 100+ frames),
    without the dispatch machinery (frames.shown_frames)."""
    keep = fr.shown_frames(frames)
    return [{"filename": f.get("filename", ""), "line": f.get("line", 0),
             "name": f.get("name", "")} for f in keep[:MAX_FRAMES_OUT]]


def summarize(snapshot: dict, *, device: int | None = None, file: str = "",
              top: int = TOP_N, points: int = 1000, cut: Any = None) -> SnapshotSummary:
    """Summarize a PyTorch memory snapshot dict. `points`: size of the serialized timeline.

    `cut` (lab.snapshots.stream.Cut): the trace holds only a window's entries and `cut` what
    the rest of it did; the columns are then the full load's, sliced to the window (the same
    base, the same allocated after every entry), and what was live at the window's peak counts
    the blocks allocated before it."""
    segments = snapshot.get("segments") or []
    traces = snapshot.get("device_traces") or []
    dev = _pick_device(traces, segments, device)
    entries = traces[dev] if dev < len(traces) and traces[dev] else []
    s = SnapshotSummary(source="pytorch-snapshot", file=file, device=dev,
                        devices={i: len(t or ()) for i, t in enumerate(traces)},
                        events=len(entries))
    s._raw = snapshot
    if cut is not None:
        # times and entry numbers stay the whole trace's, so a window can be narrowed
        s.window = {"window": cut.window.describe(), "first_entry": cut.first,
                    "entries": len(entries), "of": cut.total, "trace_start_us": cut.t0}
    has_stacks_kind = _stacks_kind(entries, segments)
    s.stacks = has_stacks_kind
    has_stacks = has_stacks_kind != "none"
    has_state, final_alloc, final_reserved, active = _final_blocks(segments, dev)

    # ---- pass 1, columnar: map/itemgetter/accumulate run in C; only the delta list is Python ----
    n = len(entries)
    try:
        acts = list(map(itemgetter("action"), entries))
    except (KeyError, TypeError):
        raise ValueError("a trace entry is not a dict with an 'action'") from None
    counts = dict(Counter(acts))
    # allocated after each entry: +size at alloc, -size at free_completed; every step in C
    signs = map(_SIGN.get, acts, repeat(0))
    try:
        a_arr = array("q", accumulate(map(mul, map(itemgetter("size"), entries), signs)))
    except KeyError:
        signs = map(_SIGN.get, acts, repeat(0))
        a_arr = array("q", accumulate(map(mul, (e.get("size", 0) or 0 for e in entries), signs)))
    cur = a_arr[-1] if n else 0
    has_time = n > 0 and all("time_us" in e for e in (entries[0], entries[-1]))
    if has_time:
        try:
            t_arr = array("q", map(itemgetter("time_us"), entries))
        except KeyError:
            t_arr = array("q", (e.get("time_us", 0) for e in entries))
    else:  # entry numbers: the whole trace's, also in a window
        first = cut.first if cut is not None else 0
        t_arr = array("q", range(first, first + n))
    rare = sorted(i for a in counts if a not in _COMMON for i in _indices(acts, a))
    seg_points: list[tuple[int, int]] = []  # (entry index, reserved change so far)
    oom_idx: list[int] = []
    seg = 0
    for i in rare:
        a = acts[i]
        if a in SEGMENT_UP:
            seg += entries[i].get("size", 0)
            seg_points.append((i, seg))
        elif a in SEGMENT_DOWN:
            seg -= entries[i].get("size", 0)
            seg_points.append((i, seg))
        elif a == OOM:
            oom_idx.append(i)
    s.actions = counts
    s.extras = read_extras(snapshot, entries, dev, counts)
    s.x_unit = "us" if has_time else "event"
    if not has_time and entries:
        s.notes.append("the trace has no time_us (torch < 2.1?): the x axis is the entry number")

    # what the trace outside a window did (nothing, without one)
    before, after = (cut.before_alloc, cut.after_alloc) if cut is not None else (0, 0)
    lowest = cut.lowest if cut is not None and cut.lowest is not None else (min(a_arr) if n else 0)
    if has_state:
        base = final_alloc - (before + cur + after)
        if base < -lowest:
            s.notes.append("the final allocator state does not match the trace; "
                           "what was allocated before recording is estimated from the trace")
            base = -lowest
    else:
        base = max(0, -lowest)
    base += before  # allocated when the window opens (the trace's start without one)
    # the array stays as accumulated; `_base` is added wherever a value leaves the summary
    s.start_bytes, s.end_bytes = base, (cur + base if n else final_alloc)
    if entries:
        s.start_us, s.end_us = t_arr[0], t_arr[-1]
    s._t, s._alloc, s._entries, s._base = t_arr, a_arr, entries, base
    # a snapshot memlab synthesized from a cpu/sim run carries the tracker's own categories
    synthesized = bool((snapshot.get("memlab") or {}).get("synthesized"))
    s.guessed = not (synthesized or any("phase" in e for e in entries[:64]))

    # reserved: the same trick with segments (a segment never freed in the trace was reserved
    # before recording began)
    if seg_points or segments:
        seg_lowest = min([v for _, v in seg_points] + [0])
        seg_before, seg_after = (cut.before_seg, cut.after_seg) if cut is not None else (0, 0)
        if cut is not None:
            seg_lowest = cut.seg_lowest
        r_base = final_reserved - (seg_before + seg + seg_after) if segments else max(0, -seg_lowest)
        r_base = max(r_base, -seg_lowest) + seg_before
        rx, ry = [t_arr[0] if entries else 0], [r_base]
        for i, v in seg_points:
            rx.append(t_arr[i])
            ry.append(v + r_base)
        if entries:
            rx.append(t_arr[-1])
            ry.append(ry[-1])
        s.reserved = Series(rx, ry)
        s.reserved_peak_bytes, s.reserved_end_bytes = max(ry), ry[-1]

    # ---- the peak and pass 2: what was live there ---------------------------------------------
    if entries:
        peak = max(a_arr)
        pi = a_arr.index(peak)
        s.peak_bytes, s.peak_index, s.peak_time_us = peak + base, pi, t_arr[pi]
        # the trace's own allocations live at the peak add up to peak - base when nothing from
        # before recording is still live there; only otherwise is the rest searched
        live_items = _live_at(entries, acts, pi, active, peak + base, cut)
        # phase bands first: the lifetimes of live blocks refine their guessed category
        s.bands = _bands(entries, t_arr, has_stacks)
        lifetimes = Lifetimes(entries, acts, pi, t_arr, s.bands, has_stacks)
        if oom_idx:  # the state that failed matters more than the peak before it
            s.at_oom = _live_described(entries, acts, oom_idx[-1], active,
                                       a_arr[oom_idx[-1]] + base, t_arr, s.bands, has_stacks, top,
                                       cut)
        del acts
        pe = entries[pi]
        s.peak_frames = _frames_out(pe.get("frames") or [])
        s.peak_where = fr.where(pe.get("frames"))
        s.peak_phase = _phase_category(pe, pe.get("frames") or [], has_stacks)[0]
    else:  # no history: the state when the snapshot was taken is all there is
        s.peak_bytes = final_alloc
        s.notes.append("no allocation history in this snapshot (record it with "
                       "torch.cuda.memory._record_memory_history()); showing the final state")
        live_items = [(b.get("size", 0), None, _block_frames(b), "") for _, b in active]
        s.peak_where = "(final state)"
        lifetimes = None
    _describe_live(s, live_items, has_stacks, top, lifetimes)

    # ---- OOMs, phase bands, the serialized timeline ----------------------------------------------
    for i in oom_idx:
        e = entries[i]
        s.ooms.append(Oom(i, t_arr[i], e.get("size", 0), e.get("device_free"),
                          fr.where(e.get("frames"))))
    if entries:
        s._points = points  # the serialized timeline is built on demand (to_dict)
    if counts.get("free_requested", 0) > counts.get(FREE, 0):
        s.notes.append("some frees were requested but not completed (record_stream or a "
                       "pending stream use); they still count as allocated")
    return s


def _live_at(entries: list, acts: list, pi: int, active: list[tuple[int, dict]], peak: int,
             cut: Any = None) -> list[tuple[int, int | None, list, str]]:
    """(bytes, alloc index or None, frames, note) of every block live just after entry `pi`.

    A block is live at the peak when its address's last alloc at or before the peak comes after
    its last free there. `dict(compress(zip(addr, index), mask))` keeps the last index of each
    address and runs entirely in C; reversed, it keeps the first. Only when the trace's own
    blocks fall short of `peak` (blocks allocated before recording were still live there) is the
    rest of the trace searched for those.

    With a window's `cut`, blocks allocated before the window and live when it opened count
    where the window did not touch their address; after it, `cut` knows which addresses the
    rest of the trace touched and which blocks it freed first.
    """
    n = len(entries)
    try:
        head_a = list(map(itemgetter("addr"), islice(entries, pi + 1)))
    except KeyError:  # an entry without an address (an oom): rare, take the slow path
        head_a = [e.get("addr") for e in islice(entries, pi + 1)]
    head_k = acts[: pi + 1]
    # the last alloc-or-free of each address; live when that last event is an alloc
    last = dict(compress(zip(head_a, range(pi + 1)), map(_SIGN.__contains__, head_k)))
    del head_a, head_k
    live = [i for i in last.values() if acts[i] == ALLOC]
    items = [(entries[i].get("size", 0), i, entries[i].get("frames") or [], "") for i in live]
    before = cut.live_before if cut is not None else {}
    items += [(e.get("size", 0), None, list(e.get("frames") or []), "allocated before the window")
              for a, e in before.items() if a not in last]
    if sum(it[0] for it in items) >= peak:
        return items
    tail = entries[:pi:-1]
    tail_a = [e.get("addr") for e in tail]
    tail_k, tail_i = acts[:pi:-1], range(n - 1, pi, -1)
    first_alloc = dict(compress(zip(tail_a, tail_i), map(ALLOC.__eq__, tail_k)))
    first_free = dict(compress(zip(tail_a, tail_i), map(FREE.__eq__, tail_k)))
    del tail, tail_a, tail_k
    pre: list[tuple[int, int | None, list, str]] = []
    for a, j in first_free.items():
        # freed after the peak, not allocated in the trace before that: allocated before recording
        if a not in last and a not in before and first_alloc.get(a, n) > j:
            e = entries[j]
            pre.append((e.get("size", 0), None, list(e.get("frames") or []),
                        "allocated before recording; the stack is where it was freed"))
    after = cut.touched_after if cut is not None else ()
    if cut is not None:  # freed after the window, not allocated since it opened
        for a, e in cut.freed_after.items():
            if not (a in last or a in first_alloc or a in first_free or a in before):
                pre.append((e.get("size", 0), None, list(e.get("frames") or []),
                            "allocated before recording; the stack is where it was freed"))
    for addr, b in active:
        if not (addr in last or addr in first_alloc or addr in first_free or addr in before
                or addr in after):  # live from before recording to the end
            pre.append((b.get("size", 0), None, _block_frames(b),
                        "allocated before recording began; still live at the end"))
    return items + pre


def _live_described(entries, acts, i, active, allocated, t_arr, bands, has_stacks, top,
                    cut=None) -> LiveAt:
    """`LiveAt` entry `i`: the blocks live there, described as the peak's are."""
    items = _live_at(entries, acts, i, active, allocated, cut)
    tmp = SnapshotSummary(source="pytorch-snapshot")
    tmp._entries = entries
    _describe_live(tmp, items, has_stacks, top, Lifetimes(entries, acts, i, t_arr, bands,
                                                          has_stacks))
    return LiveAt(i, tmp.live_bytes, tmp.live_count, tmp.by_category, tmp.by_phase, tmp.groups,
                  tmp.live_at_peak)


def _describe_live(s: SnapshotSummary, items: list, has_stacks: bool, top: int,
                   lifetimes: Lifetimes | None = None) -> None:
    s.live_count = len(items)
    s.live_bytes = sum(it[0] for it in items)
    groups: dict[str, list[int]] = {}
    by_phase: dict[str, int] = {}
    by_cat: dict[str, int] = {}
    for nbytes, i, frames, note in items:
        where = fr.where(frames)
        g = groups.get(where)
        if g is None:
            groups[where] = [nbytes, 1]
        else:
            g[0] += nbytes
            g[1] += 1
    # phases for everything live (cheap: cached per frame); categories follow from the phases
    entries = s._entries
    phase_of: dict[int, tuple[str, str]] = {}
    guessed: list[bool] = []
    for k, (nbytes, i, frames, note) in enumerate(items):
        e = entries[i] if i is not None and entries else None
        phase_of[k] = _phase_category(e, frames, has_stacks)
        guessed.append(not (e is not None and e.get("category") not in (None, "", "unknown")))
    if lifetimes is not None:  # a guessed category, refined by when the block was freed
        lifetimes.learn_parameters(items, [phase_of[k][0] for k in range(len(items))])
    for k, (nbytes, i, frames, note) in enumerate(items):
        ph, cat = phase_of[k]
        if lifetimes is not None and guessed[k]:
            cat = lifetimes.refine(i, nbytes, ph, cat)
            phase_of[k] = (ph, cat)
        by_phase[ph] = by_phase.get(ph, 0) + nbytes
        by_cat[cat] = by_cat.get(cat, 0) + nbytes
    s.by_phase = dict(sorted(by_phase.items(), key=lambda kv: -kv[1]))
    s.by_category = dict(sorted(by_cat.items(), key=lambda kv: -kv[1]))
    s.groups = [{"where": w, "bytes": b, "count": c}
                for w, (b, c) in sorted(groups.items(), key=lambda kv: -kv[1][0])[:MAX_GROUPS]]
    order = sorted(range(len(items)), key=lambda k: -items[k][0])[:top]
    for k in order:
        nbytes, i, frames, note = items[k]
        t = entries[i].get("time_us") if (i is not None and entries) else None
        ph, cat = phase_of[k]
        s.live_at_peak.append(Allocation(nbytes, fr.where(frames), ph, cat, t, i,
                                         _frames_out(frames), note))


def _phase_category(e: dict | None, frames: list, has_stacks: bool) -> tuple[str, str]:
    """The entry's own phase/category when it carries them (snapshots memlab synthesized),
    else guesses from the stack."""
    if e is not None and "phase" in e:
        ph = e["phase"] or "(no phase)"
    elif e is None and not frames:
        ph = "unknown"
    else:
        ph = fr.guess_phase(frames, has_stacks)
    cat = e.get("category") if e is not None else None
    if not cat or cat == "unknown":
        cat = fr.guess_category(ph)
    return ph, cat


def _bands(entries: list, t_arr: array, has_stacks: bool) -> list[Band]:
    """Phase bands along the trace, from an even sample of allocations (a best guess)."""
    n = len(entries)
    step = max(1, n // PHASE_SAMPLES)
    bands: list[Band] = []
    for i in range(0, n, step):
        # the first alloc at or after i, within the step
        for j in range(i, min(n, i + step)):
            e = entries[j]
            if e.get("action") == ALLOC:
                ph = _phase_category(e, e.get("frames") or [], has_stacks)[0]
                if bands and bands[-1].name == ph:
                    bands[-1].end_us = t_arr[j]
                else:
                    if bands:
                        bands[-1].end_us = t_arr[j]
                    bands.append(Band(ph, t_arr[j], t_arr[j]))
                break
    if bands:
        bands[-1].end_us = t_arr[-1]
    return bands


__all__ = ["Allocation", "Band", "LiveAt", "Oom", "SCHEMA", "Series", "SnapshotSummary", "summarize"]
