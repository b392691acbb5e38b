"""Your out-of-memory, replayed under other allocator settings: would it have fit?

A snapshot that ends in an out-of-memory holds the whole story of the failure: every request the
program made, on which stream, what it freed, and the state it started from. The lab's model of
the caching allocator (lab.measure.sim.allocator: given the GPU's segment addresses it matches
real H200 traces to the byte) replays that story under `expandable_segments:True`,
`max_split_size_mb:N` or `garbage_collection_threshold:T` and says, for each, whether the request
that failed would have been served, the peak reserved on the way and how often the allocator had
to free its whole cache (retries).

"Would have fit" means exactly that: the request that failed, and every one before it, would
have been served. The trace ends at the failure, so whether the rest of the program fits is not
known, and the report says so.

The limit matters and a snapshot does not record it. In order: a `--cap` the user gives; the cap
memlab recorded at the out-of-memory (its `memlab.oom` key); the cap in the out-of-memory message
("10.00 GiB allowed", two decimals); the GPU's own free memory when the driver had less free
than the allocator asked for; else the bracket the trace itself proves (at least the highest
reserved it reached, less than what failed), every verdict checked at both ends.

Refused, with the reason: CUDA graphs and `torch.cuda.MemPool` (private pools the model does not
have), `backend:cudaMallocAsync` (another allocator), a trace that begins inside expandable
segments (their pages are not rebuilt), a snapshot without history.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace

from lab.measure.sim.allocator.model import allocation_size
from lab.measure.sim.allocator.settings import (INTERVALS, UNLIMITED, AllocatorSettings,
                                                AllocatorSettingsError, parse_alloc_conf)
from lab.measure.sim.allocator.trace_replay import (NotReplayable, StartSegment,
                                                    TraceReplayResult, replay_trace)
from lab.measure.snapshot_format import ALLOC, FREE, OOM, SEGMENT_MAP, SEGMENT_UNMAP

from .layout import DEFAULT_POOL, Layout, layout_at

MiB = 1 << 20
SPLIT_SIZES_MB = (128, 256, 512)
GC_THRESHOLDS = (0.6, 0.8)
BISECT_EVENTS = 200_000  # up to this many, a verdict that depends on the cap finds where it turns
BISECT_STEP = 1 << 20
MAX_EVENTS = 2_000_000  # longer traces are replayed from the layout this many events before the OOM
_REPLAYED = (ALLOC, FREE, OOM, SEGMENT_MAP, "segment_alloc")  # segment_alloc: the GPU's addresses
_GIB_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


@dataclass(frozen=True)
class Limit:
    """What the allocator could reserve: a memory fraction's cap, or the GPU itself."""

    lo: int
    hi: int  # == lo when known exactly
    kind: str  # "cap" (set_per_process_memory_fraction) | "device" (the GPU was full)
    source: str

    @property
    def exact(self) -> bool:
        return self.lo == self.hi


@dataclass
class Trial:
    conf: str  # PYTORCH_ALLOC_CONF as it would be set ("" : the recorded settings)
    served: bool | None  # None: the answer depends on where the limit lies in its bracket
    peak_reserved: int
    peak_allocated: int
    retries: int
    failed_at: int | None = None  # trace entry of the first request not served
    failed_request: int | None = None
    largest_free: int | None = None  # ... the largest free block of its pool when it failed
    peak_reserved_hi: int | None = None  # at the bracket's other end, when it differs
    fits_from: int | None = None  # served None: the smallest limit in the bracket that serves it
    # replayed from the compact start: the trace begins with live memory (a ring buffer's) that
    # the recorded settings laid out in cudaMalloc'd segments, and this setting turns expandable
    # segments on, under which those segments would not have existed (replay_oom's note)
    compact_start: bool = False


@dataclass
class ReplayReport:
    oom_index: int | None  # the trace entry that failed on the GPU
    refused: str = ""  # why nothing was replayed (one line)
    limit: Limit | None = None
    recorded: Trial | None = None  # the recorded settings
    reproduces: bool | None = None  # the model fails where the GPU failed
    trials: list[Trial] = field(default_factory=list)
    suggestion: str = ""  # the one-line setting to try
    first_entry: int = 0  # the first trace entry replayed
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


# ---- reading the snapshot ------------------------------------------------------------------------
def recorded_settings(snapshot: dict) -> tuple[AllocatorSettings, list[str]]:
    """The allocator settings a snapshot records (`allocator_settings`), as the model takes them."""
    raw = snapshot.get("allocator_settings") or {}
    notes: list[str] = []
    s = AllocatorSettings()
    conf = raw.get("PYTORCH_CUDA_ALLOC_CONF") or raw.get("PYTORCH_ALLOC_CONF") or ""
    if isinstance(conf, str) and conf:
        try:
            s = parse_alloc_conf(conf)
        except AllocatorSettingsError as e:
            notes.append(f"the recorded PYTORCH_CUDA_ALLOC_CONF is not one the model reads ({e}); "
                         "its separate fields are used")
    split = raw.get("max_split_size")
    if isinstance(split, int) and not isinstance(split, bool):
        s = replace(s, max_split_size=split if 0 < split < UNLIMITED else UNLIMITED)
    gc = raw.get("garbage_collection_threshold")
    if isinstance(gc, (int, float)) and not isinstance(gc, bool) and 0 <= gc < 1:
        s = replace(s, garbage_collection_threshold=float(gc))
    if isinstance(raw.get("expandable_segments"), bool):
        s = replace(s, expandable_segments=raw["expandable_segments"])
    div = raw.get("roundup_power2_divisions")
    if isinstance(div, dict) and div:
        try:
            values = [int(v) for _, v in sorted(div.items(), key=lambda kv: int(kv[0]))]
            s = replace(s, roundup_power2_divisions=tuple((values + [0] * INTERVALS)[:INTERVALS]))
        except (TypeError, ValueError):
            notes.append("the recorded roundup_power2_divisions is not a table of numbers: ignored")
    return s, notes


def trace_events(entries: list, first: int = 0, last: int | None = None) -> list[tuple]:
    """(action, addr, size, stream) of the entries the replay needs, and their trace indices."""
    out = []
    end = len(entries) if last is None else last + 1
    for i in range(first, end):
        e = entries[i]
        act = e.get("action")
        if act in _REPLAYED:
            out.append((act, e.get("addr", 0), int(e.get("size", 0) or 0),
                        int(e.get("stream", 0) or 0), i))
    return out


def refusal(snapshot: dict, entries: list, start: Layout, final_pools: set) -> str:
    """Why this trace cannot be replayed ('' when it can)."""
    conf = str((snapshot.get("allocator_settings") or {}).get("PYTORCH_CUDA_ALLOC_CONF") or "")
    if "cudaMallocAsync" in conf:
        return ("backend:cudaMallocAsync: the driver's stream-ordered allocator, not the caching "
                "allocator the model follows")
    pools = set(final_pools) | start.private_pools | {
        tuple(e["pool_id"]) for e in entries[:10_000] if isinstance(e.get("pool_id"), (list, tuple))
        and tuple(e["pool_id"]) != DEFAULT_POOL}
    if pools:
        return (f"{len(pools)} private memory pool(s) ({', '.join(map(str, sorted(pools)[:3]))}): "
                "CUDA graphs and torch.cuda.MemPool keep their own segments, which the model "
                "does not have")
    if any(s.expandable for s in start.segments.values()):
        return ("the trace begins inside expandable segments (the ring buffer dropped their "
                "start): which pages were mapped is not rebuilt")
    return ""


def start_segments(start: Layout) -> list[StartSegment]:
    return [StartSegment(seg.address, seg.size, seg.stream, tuple(blocks), seg.small)
            for seg_addr, blocks in start.blocks_by_segment().items()
            for seg in (start.segments[seg_addr],)]


# ---- the limit ---------------------------------------------------------------------------------------
_ALLOWED = re.compile(r"([0-9]+(?:\.[0-9]+)?) (B|KiB|MiB|GiB|TiB) allowed")


def cap_from_message(message: str) -> tuple[int, int] | None:
    """'… 10.00 GiB allowed; …' -> the range of caps that print so (two decimals)."""
    m = _ALLOWED.search(message or "")
    if not m:
        return None
    unit = _GIB_UNITS[m.group(2)]
    value = float(m.group(1))
    half = 0.005 * unit if unit > 1 else 0
    return max(0, int((value - 0.005) * unit)) if half else int(value), int(value * unit + half)


def find_limit(snapshot: dict, entries: list, oom_index: int, start_reserved: int, *,
               cap: int | None = None, message: str = "") -> Limit:
    """The limit the out-of-memory at `oom_index` was measured against (see the module docstring)."""
    e = entries[oom_index]
    request = int(e.get("size", 0) or 0)
    reserved, peak = start_reserved, start_reserved
    for j in range(oom_index):  # reserved just before the failure, and the most it ever was
        act = entries[j].get("action")
        if act in ("segment_alloc", SEGMENT_MAP):
            reserved += int(entries[j].get("size", 0) or 0)
            peak = max(peak, reserved)
        elif act in ("segment_free", SEGMENT_UNMAP):
            reserved -= int(entries[j].get("size", 0) or 0)
    seg = allocation_size(-(-max(request, 1) // 512) * 512)
    if cap is not None:
        return Limit(cap, cap, "cap", "--cap")
    meta = (snapshot.get("memlab") or {}).get("oom") or {}
    if isinstance(meta.get("cap"), int) and meta["cap"] > 0:
        return Limit(meta["cap"], meta["cap"], "cap",
                     "the cap memlab recorded at the out-of-memory")
    message = message or str(meta.get("message") or "")
    got = cap_from_message(message)
    if got is not None:
        lo, hi = max(got[0], peak), max(got[1], peak)
        return Limit(lo, hi, "cap", "the out-of-memory message ('… allowed')")
    free = e.get("device_free")
    if isinstance(free, int) and free < seg:
        return Limit(reserved + free, reserved + free, "device",
                     "the GPU's free memory at the failure (no memory fraction was set)")
    return Limit(peak, max(peak, reserved + seg - 1), "cap",
                 "the trace: at least the highest reserved it reached, less than what failed "
                 "(give --cap for one answer)")


# ---- the replay ----------------------------------------------------------------------------------------
def candidates(recorded: AllocatorSettings, limit: Limit) -> list[tuple[str, AllocatorSettings]]:
    """The settings to try, each one change from the recorded ones."""
    out = []
    if not recorded.expandable_segments:
        out.append(("expandable_segments:True", replace(recorded, expandable_segments=True)))
    for mb in SPLIT_SIZES_MB:
        if recorded.max_split_size != mb * MiB:
            out.append((f"max_split_size_mb:{mb}", replace(recorded, max_split_size=mb * MiB)))
    if limit.kind == "cap":  # garbage collection acts only under a memory fraction
        for t in GC_THRESHOLDS:
            out.append((f"garbage_collection_threshold:{t:g}",
                        replace(recorded, garbage_collection_threshold=t)))
    return out


def given(recorded: AllocatorSettings, conf: str) -> AllocatorSettings:
    """`conf` (e.g. "max_split_size_mb:200") over the recorded settings: what setting it in the
    environment of the same program would have changed."""
    ours = parse_alloc_conf(conf)
    named = {part.split(":", 1)[0].strip().removesuffix("_mb") for part in conf.split(",")}
    return replace(recorded, **{k: v for k, v in asdict(ours).items() if k in named})


def _trial(conf: str, events: list, start: list, settings: AllocatorSettings, limit: Limit,
           stop: int, total: int, recorded: AllocatorSettings | None = None) -> Trial:
    """`recorded`: the recorded settings, when `settings` is a changed one; a start with live
    blocks is then replayed compact if `settings` turns expandable segments on."""
    compact = (recorded is not None and settings.expandable_segments
               and not recorded.expandable_segments and any(seg.live for seg in start))

    def run(at: int) -> TraceReplayResult:
        kw = {"cap": at} if limit.kind == "cap" else {"device_limit": at}
        return replay_trace(events, start=start, settings=settings, stop=stop, total=total,
                            compact_start=compact, **kw)

    lo = run(limit.lo)
    hi = lo if limit.exact else run(limit.hi)
    served = lo.served if lo.served == hi.served else None
    worst = lo if not lo.served else hi
    f = worst.failure
    fits_from = None
    if served is None and not lo.served and len(events) <= BISECT_EVENTS:
        a, z = limit.lo, limit.hi  # run(a) fails, run(z) serves
        while z - a > BISECT_STEP:
            mid = (a + z) // 2
            a, z = (a, mid) if run(mid).served else (mid, z)
        fits_from = z
    return Trial(conf, served, lo.peak_reserved, lo.peak_allocated, lo.retries,
                 events[f.index][4] if f and f.index >= 0 else None, f.request if f else None,
                 f.largest_free if f else None,
                 hi.peak_reserved if hi.peak_reserved != lo.peak_reserved else None, fits_from,
                 compact)


def replay_oom(snapshot: dict, device: int, entries: list, *, cap: int | None = None,
               message: str = "", total: int | None = None, max_events: int = MAX_EVENTS,
               oom_index: int | None = None, settings: list[str] | None = None) -> ReplayReport:
    """Replay the trace up to its (last) out-of-memory under the recorded settings and each
    candidate, or each of `settings` (PYTORCH_ALLOC_CONF strings, each applied over the recorded
    settings: AllocatorSettingsError when one does not parse); see the module docstring."""
    if oom_index is None:
        ooms = [i for i, e in enumerate(entries) if e.get("action") == OOM]
        oom_index = ooms[-1] if ooms else None
    report = ReplayReport(oom_index)
    if oom_index is None:
        report.refused = "the trace has no out-of-memory: nothing failed to replay"
        return report
    first = max(0, oom_index - max_events)
    start = layout_at(snapshot, device, first - 1, entries)
    final_pools = {tuple(s.get("segment_pool_id")) for s in snapshot.get("segments") or ()
                   if isinstance(s, dict) and isinstance(s.get("segment_pool_id"), (list, tuple))
                   and tuple(s.get("segment_pool_id")) != DEFAULT_POOL}
    report.refused = refusal(snapshot, entries, start, final_pools)
    if report.refused:
        return report
    report.first_entry = first
    if first:
        report.notes.append(f"the trace has {oom_index + 1:,} entries up to the failure: the last "
                            f"{oom_index + 1 - first:,} were replayed, from the layout rebuilt at "
                            f"entry #{first:,} (as the recorded settings had left it: a setting is "
                            "not credited for holes made before; under expandable_segments its "
                            "live blocks are requested afresh, a compact start)")
    elif start.segments or start.live:
        report.notes.append(
            f"the trace begins with {len(start.live):,} live blocks in {len(start.segments):,} "
            "segments made before its first entry (a ring buffer drops the oldest): rebuilt from "
            "the snapshot's segments, laid out as the recorded settings had left them, so a "
            "setting is not credited for holes made before the trace began; under "
            "expandable_segments those segments would not have existed: there the live blocks "
            "are requested afresh, in address order, into expandable segments (a compact start: "
            "holes made before the trace are not known). Record with a larger max_entries for a "
            "whole answer")
    report.notes.extend(start.problems[:3])
    recorded, notes = recorded_settings(snapshot)
    report.notes.extend(notes)
    report.limit = find_limit(snapshot, entries, oom_index, start.reserved, cap=cap,
                              message=message)
    events = trace_events(entries, first, oom_index)
    stop = len(events) - 1
    seeds = start_segments(start)
    streams = {ev[3] for ev in events}
    if len(streams) > 1:
        report.notes.append(f"{len(streams)} streams: a freed block is reused only by its own "
                            "stream, and returns to the cache at its free_completed entry (after "
                            "the other streams' uses)")
    card = total or _total(snapshot)
    try:
        report.recorded = _trial("", events, seeds, recorded, report.limit, stop, card)
        report.reproduces = report.recorded.failed_at == oom_index
        tries = candidates(recorded, report.limit) if settings is None else [
            (conf, given(recorded, conf)) for conf in settings]
        for conf, s in tries:
            report.trials.append(_trial(conf, events, seeds, s, report.limit, stop, card,
                                        recorded))
    except NotReplayable as e:
        report.refused = str(e)
        return report
    report.suggestion = _suggest(report.trials)
    return report


def _total(snapshot: dict) -> int:
    """The card's memory, for the size of an expandable segment's virtual range: memlab records
    it; else the H200's (only the range's size depends on it, never a verdict below 1/8 of it)."""
    from lab.measure.sim.allocator.model import H200_TOTAL

    meta = (snapshot.get("memlab") or {}).get("oom") or {}
    got = meta.get("device_total")
    return got if isinstance(got, int) and got > 0 else H200_TOTAL


def _suggest(trials: list[Trial]) -> str:
    """The setting to try: one that served the request, fewest retries, then least reserved
    (expandable segments first among equals: it needs no size to be picked)."""
    ok = [t for t in trials if t.served]
    if not ok:
        return ""
    best = min(ok, key=lambda t: (t.retries, t.peak_reserved,
                                  not t.conf.startswith("expandable")))
    return best.conf


__all__ = ["GC_THRESHOLDS", "Limit", "MAX_EVENTS", "ReplayReport", "SPLIT_SIZES_MB", "Trial",
           "cap_from_message", "candidates", "find_limit", "given", "recorded_settings", "refusal",
           "replay_oom", "start_segments", "trace_events"]
