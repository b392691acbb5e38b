"""A snapshot's out-of-memory, explained: what failed, against what, and fragmentation or shortage.

At an out-of-memory the caching allocator has already freed every cached segment with no live
block and tried again; what is left is the state that failed. From the trace (lab.snapshots.layout
rebuilds that state to the entry) this says:

  the request      how many bytes, on which stream, from which pool, where in the program
  the state        allocated (live blocks) and reserved (segments) at that moment, the free
                   bytes inside reserved memory, the largest free block the request could take,
                   the holes (free bytes in segments pinned by a live block)
  the verdict      fragmentation: the bytes were there (free reserved memory covered the request,
                   or allocated + request stays under the limit) but in pieces no larger than the
                   largest free block; shortage: even packed perfectly, the live tensors and the
                   request do not fit the limit
  what is live     by category and by stack at the failure (lab.snapshots.summary's `at_oom`)
  what it can't see  memory made before the trace began, outside PyTorch's allocator, or freed
                   on another stream but not yet returned

The limit (a memory fraction's cap, or the GPU itself) comes from lab.snapshots.replay.find_limit.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from lab.measure.snapshot_format import FREE, OOM

from .layout import SMALL_REQUEST, _rounded, layout_at
from .replay import Limit, find_limit, recorded_settings

# live blocks and the request fit under the limit with less than this share of it to spare:
# "at the limit" (a layout can serve this request; the memory is full all the same)
AT_LIMIT = 0.02


@dataclass
class OomExplanation:
    index: int  # the trace entry of the out-of-memory (the last one, when there are several)
    count: int  # out-of-memory entries in the trace
    time_us: int | None
    request: int
    stream: int
    pool: str  # "large" | "small"
    where: str  # the program's frame that asked
    device_free: int | None  # what the driver reported free at that moment (the whole GPU)
    allocated: int
    reserved: int
    largest_free: int
    holes: int
    segments: int
    verdict: str  # "fragmentation" | "at the limit" | "shortage" | "unclear"
    why: str  # one line, with the numbers
    limit: Limit | None = None
    settings: str = ""  # PYTORCH_CUDA_ALLOC_CONF the allocator ran with ("" : the defaults)
    at_failure: bool = False  # the snapshot's own segments are this state (taken at the OOM)
    blind: list[str] = field(default_factory=list)  # what the trace cannot see

    @property
    def free_reserved(self) -> int:
        return self.reserved - self.allocated

    def to_dict(self) -> dict:
        d = asdict(self)
        d["free_reserved"] = self.free_reserved
        return d


def explain_oom(snapshot: dict, device: int, entries: list, *, cap: int | None = None,
                message: str = "", index: int | None = None) -> OomExplanation | None:
    """The (last) out-of-memory of the trace, explained; None when there is none."""
    ooms = [i for i, e in enumerate(entries) if e.get("action") == OOM]
    if not ooms:
        return None
    i = ooms[-1] if index is None else index
    e = entries[i]
    from . import frames as fr

    lay = layout_at(snapshot, device, i, entries)
    start = layout_at(snapshot, device, -1, entries) if i else lay
    request = int(e.get("size", 0) or 0)
    stream = int(e.get("stream", 0) or 0)
    limit = find_limit(snapshot, entries, i, start.reserved, cap=cap, message=message)
    settings, _ = recorded_settings(snapshot)
    free = e.get("device_free")
    x = OomExplanation(i, len(ooms), e.get("time_us"), request, stream,
                       "small" if request <= SMALL_REQUEST else "large", fr.where(e.get("frames")),
                       free if isinstance(free, int) else None, lay.allocated, lay.reserved,
                       lay.largest_free(request, stream), lay.holes, len(lay.segments), "unclear",
                       "", limit, settings.describe,
                       all(x.get("action") in ("snapshot",) for x in entries[i + 1:])
                       or bool((snapshot.get("memlab") or {}).get("oom")))
    meta = snapshot.get("memlab") or {}
    if meta.get("synthesized"):
        _model_state(snapshot, entries, i, x)
    x.verdict, x.why = _verdict(x)
    x.blind = _blind(snapshot, entries, i, start, x)
    if meta.get("synthesized"):
        x.blind.insert(0, "a simulated run (memlab sim): the state at the failure is the lab's "
                          "model of the caching allocator, not a GPU's; the trace holds the "
                          "tensors the tracker saw (no library workspaces)")
    return x


def _model_state(snapshot: dict, entries: list, i: int, x: OomExplanation) -> None:
    """A snapshot memlab synthesized from a sim run gives every storage its own segment: the
    allocator's state at the failure is the model's, which the run recorded (allocated,
    reserved); the largest free block and the segments come from the model fed the same trace.
    After its retry the allocator holds no wholly free segment, so every free reserved byte is in
    a segment pinned by a live block: a hole."""
    from lab.measure.sim.allocator.trace_replay import NotReplayable, replay_trace

    from .replay import recorded_settings, trace_events

    oom = (snapshot.get("memlab") or {}).get("oom") or {}
    if not isinstance(oom.get("reserved"), int) or not isinstance(oom.get("allocated"), int):
        return
    x.allocated, x.reserved = oom["allocated"], oom["reserved"]
    x.holes = x.reserved - x.allocated
    x.at_failure = True
    if x.limit is not None and x.limit.kind == "cap":
        x.device_free = None  # no driver answered: the model's card, less what it reserved
    settings, _ = recorded_settings(snapshot)
    kw = {"cap": x.limit.lo} if x.limit is not None and x.limit.kind == "cap" else {}
    try:
        r = replay_trace(trace_events(entries, 0, i), settings=settings, **kw)
    except NotReplayable:
        return
    if r.failure is not None:
        x.largest_free, x.segments = r.failure.largest_free, r.failure.segments


def _verdict(x: OomExplanation) -> tuple[str, str]:
    from lab.report import format_bytes as b

    need = x.allocated + _rounded(x.request)
    free = x.free_reserved
    largest = f"the largest free block was {b(x.largest_free)}"
    if free >= x.request:
        return "fragmentation", (f"{b(free)} was reserved but free, more than the {b(x.request)} "
                                 f"asked for, but in pieces: {largest}")
    lim = x.limit
    what = "the cap" if lim is not None and lim.kind == "cap" else "what the GPU could give"
    if lim is not None and need <= lim.lo:
        spare = lim.lo - need
        if spare < AT_LIMIT * lim.lo:
            return "at the limit", (
                f"live blocks and the request ({b(need)}) fit under {what} ({_limit_text(lim)}) "
                f"by only {b(spare)}: a better layout could serve this request, but the memory "
                "is full; the next request would most likely fail")
        return "fragmentation", (f"live blocks and the request ({b(need)}) stay under {what} "
                                 f"({_limit_text(lim)}), but the free memory was in pieces: "
                                 f"{largest}")
    if lim is not None and need > lim.hi:
        return "shortage", (f"the live blocks ({b(x.allocated)}) and the request "
                            f"({b(x.request)}) exceed {what} ({_limit_text(lim)}): no layout fits")
    return "unclear", (f"live blocks and the request come to {b(need)}; the limit lies in "
                       f"{_limit_text(lim)}: give --cap to decide")


def _limit_text(lim: Limit | None) -> str:
    from lab.report import format_bytes as b

    if lim is None:
        return "unknown"
    return b(lim.lo) if lim.exact else f"{b(lim.lo)} to {b(lim.hi)}"


def _blind(snapshot: dict, entries: list, i: int, start, x: OomExplanation) -> list[str]:
    from lab.report import format_bytes as b

    out = []
    if start.live or start.segments:
        out.append(f"{b(start.allocated)} in {len(start.live):,} blocks and {len(start.segments):,} "
                   "segments existed before the trace's first entry (recording began late, or "
                   "the ring buffer dropped the start): their stacks are known only if they were "
                   "freed later in the trace")
    pending = {}
    for e in entries[: i + 1]:
        a = e.get("action")
        if a == "free_requested":
            pending[e.get("addr")] = int(e.get("size", 0) or 0)
        elif a == FREE:
            pending.pop(e.get("addr"), None)
    if pending:
        out.append(f"{len(pending):,} blocks ({b(sum(pending.values()))}) were freed by the program "
                   "but still in use by another stream (record_stream): they count as allocated")
    if x.limit is not None and x.limit.kind == "device" and x.device_free is not None:
        out.append("memory outside PyTorch's allocator (the CUDA context, NCCL, other processes) "
                   "is not in the trace; it is why the GPU had only "
                   f"{b(x.device_free)} free")
    if not x.at_failure:
        later = len(entries) - 1 - i
        out.append(f"the snapshot was taken {later:,} entr{'y' if later == 1 else 'ies'} after the "
                   "failure: the state at "
                   "the failure is rebuilt from the trace")
    return out





def diagnose(summary, *, cap: int | None = None, message: str = "", replay: bool = True,
             settings: list[str] | None = None):
    """(OomExplanation | None, ReplayReport | None) for a summarized snapshot (`open_summary`):
    what `memlab view` shows under the summary."""
    from .replay import replay_oom

    raw, entries = summary._raw, summary._entries
    if raw is None or not entries or not summary.ooms:
        return None, None
    x = explain_oom(raw, summary.device, entries, cap=cap, message=message)
    if x is None or not replay:
        return x, None
    return x, replay_oom(raw, summary.device, entries, cap=cap, message=message,
                         oom_index=x.index, settings=settings)
__all__ = ["AT_LIMIT", "OomExplanation", "diagnose", "explain_oom"]
