"""An out-of-memory's explanation and its replay under other settings, as plain text.

The headless half of `memlab view` for a snapshot that ends in an out-of-memory (the numbers come
from lab.snapshots.oom and lab.snapshots.replay; formatting is lab.report's).
"""

from __future__ import annotations

from lab.report import format_bytes as b
from lab.report import table

from .oom import OomExplanation
from .replay import ReplayReport, Trial
from .text import when

FIT_MEANS = ("\"yes\" means the request that failed, and every request before it, would have been "
             "served; the trace ends at the failure, so whether the rest of the program fits "
             "is not known")


def render_oom(s, x: OomExplanation, r: ReplayReport | None, top: int = 8) -> str:
    out = [f"out of memory at {when(s, x.time_us)} (entry #{x.index:,}"
           + (f"; the last of {x.count}" if x.count > 1 else "") + ")"]
    out.append(f"  asked for {b(x.request)} ({x.request:,} B) on stream {x.stream}, from the "
               f"{x.pool} pool — {x.where}")
    out.append(f"  at that moment: {b(x.allocated)} allocated, {b(x.reserved)} reserved "
               f"({b(x.free_reserved)} reserved but free) in {x.segments:,} segment"
               f"{'s' * (x.segments != 1)}; the largest "
               f"free block it could take: {b(x.largest_free)}; in holes: {b(x.holes)}")
    if x.limit is not None:
        lim = x.limit
        value = b(lim.lo) if lim.exact else f"{b(lim.lo)} to {b(lim.hi)}"
        kind = "the cap" if lim.kind == "cap" else "what the GPU could give"
        out.append(f"  the limit, {kind}: {value} (from {lim.source})")
    if x.device_free is not None and x.limit is not None and x.limit.kind == "cap":
        out.append(f"  the driver reported {b(x.device_free)} free on the whole GPU (a memory "
                   "fraction does not change what it reports)")
    out.append(f"  verdict: {x.verdict.upper()}: {x.why}")
    out.append(f"  allocator settings: {x.settings or 'the defaults'}")
    live = s.at_oom
    if live is not None and live.count:
        out.append("")
        guess = " (guessed from stacks and lifetimes)" if s.guessed else ""
        out.append(f"live at the failure: {live.count:,} block{'s' * (live.count != 1)}, "
                   f"{b(live.bytes)}")
        out.append(f"  by category{guess}: "
                   + ", ".join(f"{k} {b(v)}" for k, v in live.by_category.items()))
        total = live.bytes or 1
        rows = [[g["where"], b(g["bytes"]), f"{g['count']:,}", f"{g['bytes'] / total:.0%}"]
                for g in live.groups[:top]]
        out.append(table(["where (first user frame)", "bytes", "blocks", "share"], rows,
                         right={1, 2, 3}))
    for line in x.blind:
        out.append(f"  not seen: {line}")
    if r is not None:
        out.append("")
        synthesized = bool(((s._raw or {}).get("memlab") or {}).get("synthesized"))
        out.extend(render_replay(r, "the run" if synthesized else "the GPU").splitlines())
    return "\n".join(out)


def _served(t: Trial) -> str:
    if t.served is None:
        return f"if the cap ≥ {b(t.fits_from)}" if t.fits_from else "depends on the cap"
    return ("yes" if t.served else "no") + (" (compact start)" if t.compact_start else "")


def _peak(t: Trial) -> str:
    if t.peak_reserved_hi is not None:
        return f"{b(t.peak_reserved)}–{b(t.peak_reserved_hi)}"
    return b(t.peak_reserved)


def _failed(t: Trial, oom_index: int | None) -> str:
    if t.served is not False or t.failed_at is None:
        return ""
    if t.failed_at == oom_index:
        return "the same request" + (f"; largest free block {b(t.largest_free)}"
                                     if t.largest_free else "")
    return f"fails earlier, at entry #{t.failed_at:,} ({b(t.failed_request)})"


def render_replay(r: ReplayReport, run: str = "the GPU") -> str:
    """`run`: what failed ("the GPU", or "the run" for a sim run's snapshot)."""
    out = ["would it have fit? the trace replayed to the failure through the lab's model of the "
           "caching allocator"]
    if r.refused:
        out.append(f"  not replayed: {r.refused}")
        return "\n".join(out)
    rows = []
    if r.recorded is not None:
        t = r.recorded
        agree = f"as in {run}" if r.reproduces else f"the model disagrees with {run}"
        rows.append(["(as recorded)", f"{_served(t)} ({agree})", _peak(t), f"{t.retries}",
                     _failed(t, r.oom_index) if not r.reproduces else ""])
    for t in r.trials:
        rows.append([t.conf, _served(t), _peak(t), f"{t.retries}", _failed(t, r.oom_index)])
    out.append(table(["setting (over the recorded)", "served", "peak reserved", "retries", "where"],
                     rows, right={2, 3}))
    if r.limit is not None and not r.limit.exact:
        out.append(f"  the cap is known only to lie between {b(r.limit.lo)} and {b(r.limit.hi)}: "
                   "each setting was replayed at both ends; give --cap (or --oom-message) for "
                   "one answer")
    if r.reproduces is False:
        out.append("  the model does not fail where the GPU failed under the recorded settings: "
                   "treat the answers below it with care (is the cap right?)")
    if r.suggestion:
        out.append(f"  try: PYTORCH_ALLOC_CONF={r.suggestion} (before CUDA starts; "
                   "PYTORCH_CUDA_ALLOC_CONF in torch < 2.9)")
    elif r.trials and all(t.served is False for t in r.trials):
        out.append("  no setting serves the request: the tensors themselves do not fit; make "
                   "them smaller (lessons 07-15) or the batch")
    out.append(f"  {FIT_MEANS}")
    for n in r.notes:
        out.append(f"  note: {n}")
    return "\n".join(out)


__all__ = ["FIT_MEANS", "render_oom", "render_replay"]
