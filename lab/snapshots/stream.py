"""Part of a huge snapshot: stream the pickle, keep the trace entries of a `--window`, fold the rest.

`memlab view FILE` loads a snapshot whole with the C unpickler (lab.snapshots.unpickle): fast,
but every trace entry becomes a dict, about 7 times the file's size in memory. Past
`FULL_OPEN_LIMIT` a file is read here instead: one pass of the standard library's own
pure-Python unpickler (`pickle._Unpickler`, subclassed; the C one offers no hook between
opcodes), which hands us each batch of trace entries as it is appended (APPENDS, 1,000 entries
from the C pickler). Entries inside the window stay as they are; each one outside is folded into
a `Cut` (net allocated and reserved change before and after the window, the lowest point, the
blocks live when the window opens, what is freed after it) and then dropped, memo slot included,
so memory follows the window, not the file. `summarize(..., cut=)` turns that into the same
columns the full load gives, sliced: allocated after every kept entry, counted from the same base.

What memoization costs: a pickle refers back to any object it wrote before (BINGET), so the
memo would keep every entry alive. An entry dict is never referred to again (torch builds one per
event), so its slot goes at once. Its `frames` list can be: PyTorch shares one list between the
events of one captured traceback (a block's segment_alloc, alloc and free_completed), so a
dropped entry's list stays in the memo until that address's free_completed (or segment_free)
comes by. A later reference to a list that went anyway reads as no stack, and is counted.

Slow by nature (~25 µs an entry on the dev machine: Python, opcode by opcode; bench/
snapshot_large.py prints it), bounded in memory. Nothing here runs code from the file: globals
and persistent ids are refused as lab.snapshots.unpickle refuses them.
"""

from __future__ import annotations

import math
import pickle
import re
from dataclasses import dataclass, field
from typing import IO, Any

from lab.measure.snapshot_format import ALLOC, FREE, SEGMENT_DOWN, SEGMENT_UP

from .unpickle import PlainDataOnly, gc_paused

FULL_OPEN_LIMIT = 500 * 10**6  # bytes of pickle opened whole; past it, --window (bench: 15 s, 4 GB)

WINDOW_HELP = ("START:END, seconds since the trace's first entry (10s:20s, 1.5s:, :500ms) or "
               "entry numbers (1000000:2000000), START included, END not")
_TIME_UNITS = {"s": 1e6, "ms": 1e3, "us": 1.0, "µs": 1.0, "min": 60e6}
_END_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)?\s*([a-zµ]*)\s*$")


class WindowError(ValueError):
    """One line: what is wrong with a --window, and what would be accepted."""


@dataclass(frozen=True)
class Window:
    """A range of a trace: `kind` "time" (µs since the trace's first entry) or "entries"
    (entry numbers); `lo` included, `hi` excluded; None: open."""

    kind: str
    lo: float | None
    hi: float | None
    text: str = ""

    def describe(self) -> str:
        return self.text or f"{self.lo}:{self.hi}"


def parse_window(text: str) -> Window:
    """'10s:20s' -> Window('time', 10e6, 20e6); '1000:5000' -> Window('entries', 1000, 5000)."""
    raw = str(text)
    shown = raw if len(raw) <= 40 else raw[:37] + "…"
    bad = WindowError(f"--window {shown!r}: give {WINDOW_HELP}")
    if raw.count(":") != 1 or len(raw) > 64:
        raise bad
    ends: list[tuple[str, float] | None] = []
    for part in raw.split(":"):
        m = _END_RE.match(part)
        if not m or (m.group(2) and not m.group(1)):
            raise bad
        if m.group(1) is None:
            ends.append(None)
            continue
        unit = m.group(2)
        if unit and unit not in _TIME_UNITS:
            raise bad
        value = float(m.group(1))
        if unit:
            ends.append(("time", value * _TIME_UNITS[unit]))
        elif value != int(value):
            raise WindowError(f"--window {shown!r}: an entry number is a whole number; for a "
                              f"time give a unit ({m.group(1)}s)")
        else:
            ends.append(("entries", int(value)))
    kinds = {e[0] for e in ends if e is not None}
    if not kinds:
        raise WindowError(f"--window {shown!r}: give at least one end; {WINDOW_HELP}")
    if len(kinds) > 1:
        raise WindowError(f"--window {shown!r}: both ends must be times (with a unit) or both "
                          "entry numbers (without one)")
    lo, hi = (None if e is None else e[1] for e in ends)
    if any(v is not None and not math.isfinite(v) for v in (lo, hi)):
        raise bad
    if lo is not None and hi is not None and hi <= lo:
        raise WindowError(f"--window {shown!r}: the end must come after the start")
    return Window(kinds.pop(), lo, hi, raw.strip())


@dataclass
class Cut:
    """One device trace, folded outside the window (what `summarize(cut=)` needs)."""

    window: Window
    total: int = 0  # entries in the whole trace
    first: int = -1  # the whole trace's number of the first kept entry (-1: none kept)
    kept: int = 0
    t0: int | None = None  # time_us of the trace's first entry
    t_last: int | None = None
    before_alloc: int = 0  # net allocated change of the entries before the window
    after_alloc: int = 0
    before_seg: int = 0  # net reserved change (segment events) before the window
    after_seg: int = 0
    cum: int = 0  # running allocated change over the whole trace
    lowest: int | None = None  # its lowest point (after an entry)
    seg_cum: int = 0
    seg_lowest: int = 0  # the lowest running reserved change (0 included, as the full load)
    live_before: dict = field(default_factory=dict)  # addr -> alloc entry live when it opens
    touched_after: set = field(default_factory=set)  # addresses allocated or freed after it
    freed_after: dict = field(default_factory=dict)  # addr -> first free entry after, no alloc
    phase: int = 0  # 0 before the window, 1 in it, 2 after it

    def _place(self, i: int, e: dict) -> int:
        w = self.window
        if w.kind == "entries":
            x = i
        else:
            t = e.get("time_us")
            if t is None:
                raise WindowError(f"--window {w.describe()}: this trace has no time_us (torch < "
                                  "2.1?); give entry numbers instead, e.g. --window 0:1000000")
            x = t - self.t0
        if self.phase == 0 and (w.lo is None or x >= w.lo):
            self.phase = 1
        if self.phase == 1 and w.hi is not None and x >= w.hi:
            self.phase = 2
        return self.phase

    def span_text(self) -> str:
        if self.window.kind == "time" and self.t0 is not None and self.t_last is not None:
            return f"{(self.t_last - self.t0) / 1e6:,.3f} s, {self.total:,} entries"
        return f"{self.total:,} entries"


class _Memo(dict):
    """The unpickler's memo; a reference to a slot that was dropped reads as an empty stack."""

    misses = 0

    def __missing__(self, key):
        self.misses += 1
        return []


class _WindowUnpickler(PlainDataOnly, pickle._Unpickler):  # plain data only
    """The standard library's pure-Python unpickler, with trace batches diverted to `Cut`s."""

    dispatch = dict(pickle._Unpickler.dispatch)

    def __init__(self, f: IO[bytes], window: Window):
        super().__init__(f)
        self._f = f
        self.memo = _Memo()
        self._window = window
        self._memo_next = 0
        self._fresh: dict[int, int] = {}  # id(empty dict or list when memoized) -> memo slot
        self.cuts: dict[int, Cut] = {}  # id(trace list) -> its cut
        self._frames_due: dict[Any, list[int]] = {}  # addr -> memo slots of dropped entries' frames

    def load(self) -> Any:
        """`pickle._Unpickler.load` reading straight from the (buffered, C) file: its `_Unframer`
        is Python called once per opcode, half the time of a load. Protocol 4's FRAMEs are only
        a hint for readers (opcodes run on across them), so a FRAME's length is skipped."""
        f = self._f
        self.read, self.readinto, self.readline = f.read, f.readinto, f.readline
        self.metastack, self.stack = [], []
        self.append = self.stack.append
        self.proto = 0
        read, dispatch = self.read, self.dispatch
        try:
            while True:
                key = read(1)
                if not key:
                    raise EOFError
                dispatch[key[0]](self)
        except pickle._Stop as stop:
            return stop.value

    def load_frame(self):
        if len(self.read(8)) != 8:
            raise pickle.UnpicklingError("pickle data was truncated")

    dispatch[pickle.FRAME[0]] = load_frame

    # -- the memo: slots counted apart from its size (slots are deleted) ---------------------------
    def _remember(self, i: int, obj: Any) -> None:
        self.memo[i] = obj
        if type(obj) in (dict, list) and not obj:
            self._fresh[id(obj)] = i

    def load_memoize(self):
        self._remember(self._memo_next, self.stack[-1])
        self._memo_next += 1

    def load_put(self):
        i = int(self.readline()[:-1])
        if i < 0:
            raise ValueError("negative PUT argument")
        self._remember(i, self.stack[-1])
        self._memo_next = max(self._memo_next, i + 1)

    def load_binput(self):
        i = self.read(1)[0]
        self._remember(i, self.stack[-1])
        self._memo_next = max(self._memo_next, i + 1)

    def load_long_binput(self):
        i, = pickle.unpack("<I", self.read(4))
        self._remember(i, self.stack[-1])
        self._memo_next = max(self._memo_next, i + 1)

    dispatch[pickle.MEMOIZE[0]] = load_memoize
    dispatch[pickle.PUT[0]] = load_put
    dispatch[pickle.BINPUT[0]] = load_binput
    dispatch[pickle.LONG_BINPUT[0]] = load_long_binput

    # -- trace batches ----------------------------------------------------------------------------
    def load_appends(self):
        items = self.pop_mark()
        target = self.stack[-1]
        if type(target) is list and items and type(items[0]) is dict and "action" in items[0]:
            self._take(target, items)
            return
        if isinstance(target, list):
            target.extend(items)
        else:
            for item in items:
                target.append(item)

    def load_append(self):
        item = self.stack.pop()
        target = self.stack[-1]
        if type(target) is list and type(item) is dict and "action" in item:
            self._take(target, [item])
        else:
            target.append(item)

    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.APPEND[0]] = load_append

    def _take(self, target: list, items: list) -> None:
        cut = self.cuts.get(id(target))
        if cut is None:
            cut = self.cuts[id(target)] = Cut(self._window)
            cut._list = target  # keeps the id meaning this list until the load ends
        for e in items:
            i = cut.total
            cut.total += 1
            t = e.get("time_us")
            if cut.t0 is None:
                cut.t0 = t
            if t is not None:
                cut.t_last = t
            act = e.get("action")
            size = e.get("size", 0) or 0
            delta = size if act == ALLOC else -size if act == FREE else 0
            cut.cum += delta
            if cut.lowest is None or cut.cum < cut.lowest:
                cut.lowest = cut.cum
            seg = size if act in SEGMENT_UP else -size if act in SEGMENT_DOWN else 0
            if seg:
                cut.seg_cum += seg
                cut.seg_lowest = min(cut.seg_lowest, cut.seg_cum)
            where = cut._place(i, e)
            if where == 1:
                if cut.first < 0:
                    cut.first = i
                cut.kept += 1
                target.append(e)
                self._forget_dict(e)  # kept by the list; never referred to again
                if act == FREE or act in SEGMENT_DOWN:  # a block from before the window ends
                    for s in self._frames_due.pop(e.get("addr"), ()):
                        self.memo.pop(s, None)
                continue
            addr = e.get("addr")
            if where == 0:
                cut.before_alloc += delta
                cut.before_seg += seg
                if act == ALLOC:
                    cut.live_before[addr] = e
                elif act == FREE:
                    cut.live_before.pop(addr, None)
            else:
                cut.after_alloc += delta
                cut.after_seg += seg
                if act == ALLOC:
                    cut.touched_after.add(addr)
                elif act == FREE:
                    if addr not in cut.touched_after:
                        cut.freed_after[addr] = e
                    cut.touched_after.add(addr)
            self._drop(e, act, addr)

    def _forget_dict(self, e: dict) -> None:
        slot = self._fresh.pop(id(e), None)
        if slot is not None:
            self.memo.pop(slot, None)

    def _drop(self, e: dict, act: str, addr: Any) -> None:
        """Free a folded entry's memo slots: the dict now, its frames list once its block is freed."""
        self._forget_dict(e)
        frames = e.get("frames")
        slot = self._fresh.pop(id(frames), None) if type(frames) is list else None
        due = self._frames_due.get(addr)
        if slot is not None:
            if due is None:
                due = self._frames_due[addr] = []
            due.append(slot)
        if act == FREE or act in SEGMENT_DOWN:
            for s in self._frames_due.pop(addr, ()):
                self.memo.pop(s, None)


def load_window(f: IO[bytes], window: Window) -> tuple[Any, dict[int, Cut], int]:
    """(the snapshot with only the window's trace entries, {id(trace list): Cut}, stacks lost)."""
    u = _WindowUnpickler(f, window)
    with gc_paused():
        data = u.load()
    return data, u.cuts, u.memo.misses


def cuts_by_device(data: Any, cuts: dict[int, Cut]) -> dict[int, Cut]:
    """The cuts keyed by device number (a trace's place in `device_traces`)."""
    traces = data.get("device_traces") if isinstance(data, dict) else None
    out: dict[int, Cut] = {}
    for d, t in enumerate(traces if isinstance(traces, list) else ()):
        c = cuts.get(id(t))
        if c is not None:
            c._list = None
            out[d] = c
    return out


__all__ = ["FULL_OPEN_LIMIT", "WINDOW_HELP", "Cut", "Window", "WindowError", "cuts_by_device",
           "load_window", "parse_window"]
