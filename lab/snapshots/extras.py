"""What newer snapshots record beyond alloc/free, read where it helps the reader.

PyTorch's snapshots grew fields release by release; an older viewer ignores them, this one shows
what they say:

  allocator_settings     the PYTORCH_CUDA_ALLOC_CONF the allocator ran with (and its fields)
  compile_context        on trace entries, with `_record_memory_history(compile_context=True)`:
                         which torch.compile frame / graph made the allocation
  user_metadata          on trace entries: the string `torch.cuda.memory._set_memory_metadata()`
                         set when the allocation was made (a step number, a phase name)
  annotations            `record_function` regions, with `global_record_annotations=True`: the
                         snapshot's `external_annotations` (START/END stages), or trace entries
                         whose action is `annotate`
  fx frames              frames of compiled code carrying `fx_node_name` / `fx_original_trace`
                         (`_snapshot(augment_with_fx_traces=True)`): which node, which source line
  host_segments          pinned host memory (`record_pinned_host_memory=True`)
  segment_pool_id        a segment of a private pool (CUDA graphs, torch.cuda.MemPool): (0, 0) is
  / pool_id              the default pools

Every field is optional and may be malformed in a file from elsewhere: what cannot be read is
left out, never raised.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .layout import DEFAULT_POOL

MAX_SHOWN = 8


@dataclass
class Region:
    name: str
    start_us: int
    end_us: int | None  # None: not closed in the trace


@dataclass
class Extras:
    alloc_conf: str = ""  # as recorded ("" : the defaults, or not recorded)
    settings_recorded: bool = False
    compile_contexts: dict[str, int] = field(default_factory=dict)  # context -> entries
    user_metadata: dict[str, int] = field(default_factory=dict)  # metadata -> entries
    regions: list[Region] = field(default_factory=list)
    fx_frames: int = 0  # entries whose frames carry FX node information (sampled)
    host_reserved: int | None = None  # pinned host memory, when recorded
    host_allocated: int | None = None
    private_pools: dict[str, int] = field(default_factory=dict)  # "(1, 0)" -> bytes reserved
    unknown_actions: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """What a reader should know, one line each (empty when nothing beyond the basics)."""
        from lab.report import format_bytes

        out = []
        if self.settings_recorded:
            out.append("allocator settings: " + (f"PYTORCH_CUDA_ALLOC_CONF={self.alloc_conf}"
                                                 if self.alloc_conf else "the defaults"))
        if self.compile_contexts:
            out.append("torch.compile contexts: " + _top(self.compile_contexts))
        if self.user_metadata:
            out.append("user metadata (torch.cuda.memory._set_memory_metadata): "
                       + _top(self.user_metadata))
        if self.regions:
            shown = ", ".join(r.name for r in self.regions[:MAX_SHOWN])
            more = f" … ({len(self.regions)} in all)" if len(self.regions) > MAX_SHOWN else ""
            out.append(f"annotated regions (record_function): {shown}{more}")
        if self.fx_frames:
            out.append("compiled code's frames name their FX node and source line "
                       "(augment_with_fx_traces)")
        if self.host_reserved is not None:
            out.append(f"pinned host memory: {format_bytes(self.host_reserved)} reserved, "
                       f"{format_bytes(self.host_allocated)} in use")
        if self.private_pools:
            out.append("private memory pools (CUDA graphs, torch.cuda.MemPool): " + ", ".join(
                f"{k} {format_bytes(v)}" for k, v in list(self.private_pools.items())[:4]))
        if self.unknown_actions:
            out.append("trace actions this viewer does not know (skipped): "
                       + _top(self.unknown_actions))
        return out


def _top(counts: dict[str, int]) -> str:
    items = sorted(counts.items(), key=lambda kv: -kv[1])
    text = ", ".join(f"{k[:60]} ({n:,})" for k, n in items[:MAX_SHOWN])
    return text + (f" … ({len(items)} in all)" if len(items) > MAX_SHOWN else "")


KNOWN_ACTIONS = frozenset(("alloc", "free_requested", "free_completed", "segment_alloc",
                           "segment_free", "segment_map", "segment_unmap", "oom", "snapshot",
                           "annotate"))


def read_extras(snapshot: dict, entries: list, device: int, counts: dict[str, int]) -> Extras:
    """`counts`: the trace's actions (the summary counted them already)."""
    x = Extras()
    raw = snapshot.get("allocator_settings")
    if isinstance(raw, dict) and raw:
        x.settings_recorded = True
        conf = raw.get("PYTORCH_CUDA_ALLOC_CONF") or raw.get("PYTORCH_ALLOC_CONF") or ""
        x.alloc_conf = conf if isinstance(conf, str) else ""
    x.unknown_actions = {str(a)[:40]: n for a, n in counts.items() if a not in KNOWN_ACTIONS}
    if any(k in entries[0] for k in ("compile_context", "user_metadata")) if entries else False:
        _contexts(x, entries)
    else:  # cheap probe: the fields are on every entry once recording asks for them
        for e in entries[:: max(1, len(entries) // 256)]:
            if "compile_context" in e or "user_metadata" in e:
                _contexts(x, entries)
                break
    x.regions = _regions(snapshot, entries, device, counts)
    x.fx_frames = sum(1 for e in entries[:: max(1, len(entries) // 512)]
                      if any(isinstance(f, dict) and "fx_node_name" in f
                             for f in e.get("frames") or ()))
    _host(x, snapshot.get("host_segments"))
    for seg in snapshot.get("segments") or ():
        if not isinstance(seg, dict) or seg.get("device", 0) != device:
            continue
        pool = seg.get("segment_pool_id")
        if isinstance(pool, (list, tuple)) and tuple(pool) != DEFAULT_POOL:
            key = str(tuple(pool))
            x.private_pools[key] = x.private_pools.get(key, 0) + int(seg.get("total_size", 0) or 0)
    return x


def _contexts(x: Extras, entries: list) -> None:
    cc, um = Counter(), Counter()
    for e in entries:
        c = e.get("compile_context")
        if isinstance(c, str) and c and c != "N/A":
            cc[c] += 1
        m = e.get("user_metadata")
        if isinstance(m, str) and m:
            um[m] += 1
    x.compile_contexts, x.user_metadata = dict(cc), dict(um)


def _regions(snapshot: dict, entries: list, device: int, counts: dict[str, int]) -> list[Region]:
    marks = []
    ext = snapshot.get("external_annotations")
    if isinstance(ext, list):
        for a in ext:
            if isinstance(a, dict) and a.get("device", device) == device:
                marks.append(a)
    if counts.get("annotate"):
        marks.extend(e for e in entries if e.get("action") == "annotate")
    out: list[Region] = []
    open_: dict[str, list[Region]] = {}
    for a in marks:
        name = a.get("name") or a.get("user_metadata") or ""
        t = a.get("time_us")
        if not isinstance(name, str) or not name or not isinstance(t, int):
            continue
        stage = str(a.get("stage", "START")).upper()
        if stage == "END":
            stack = open_.get(name)
            if stack:
                stack.pop().end_us = t
            continue
        r = Region(name[:80], t, None)
        out.append(r)
        open_.setdefault(name, []).append(r)
    return out


def _host(x: Extras, host) -> None:
    if not isinstance(host, list):
        return
    reserved = allocated = 0
    for seg in host:
        if not isinstance(seg, dict):
            continue
        reserved += int(seg.get("total_size", seg.get("size", 0)) or 0)
        allocated += int(seg.get("allocated_size", 0) or 0) or sum(
            int(b.get("size", 0) or 0) for b in seg.get("blocks") or ()
            if isinstance(b, dict) and str(b.get("state", "")).startswith("active"))
    x.host_reserved, x.host_allocated = reserved, allocated


__all__ = ["Extras", "KNOWN_ACTIONS", "Region", "read_extras"]
