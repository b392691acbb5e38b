"""A profiled script (or a `memlab.track()` block) as plain text: the peak, what was live there
by category and by file:line, and the phases. Torch-free; units and tables from lab.report."""

from __future__ import annotations

from lab.measure.allocator_view import UNTRACKED_PEAK_NOTE
from lab.report import DASH, format_bytes, provenance, seconds, status_text, table

MAX_PHASES = 14  # a long script has four phases a step: show the start, the peak's, the end


def _phase_rows(r, timed: bool = True) -> list[list[str]]:
    phases = list(r.phases)
    keep = set(range(len(phases)))
    if len(phases) > MAX_PHASES:
        peak_i = next((i for i, p in enumerate(phases) if p.name == r.peak.phase), 0)
        keep = set(range(8)) | {peak_i - 1, peak_i, peak_i + 1} | set(range(len(phases) - 3,
                                                                          len(phases)))
    rows, skipped = [], 0
    for i, p in enumerate(phases):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            rows.append([f"… {skipped} more", "", "", ""] + [""] * timed)
            skipped = 0
        mark = "  ← peak" if p.name == r.peak.phase else ""
        rows.append([p.name + mark, format_bytes(p.delta_bytes), format_bytes(p.end_bytes),
                     format_bytes(p.peak_bytes)] + [seconds(p.duration_s)] * timed)
    if skipped:
        rows.append([f"… {skipped} more", "", "", ""] + [""] * timed)
    return rows


def live_at_peak(r, top: int = 10) -> list:
    """The largest storages live at the peak (the result keeps the largest 1,000)."""
    idx = r.peak.index
    live = [b for b in r.blocks if b.alloc_index <= idx
            and (b.free_index is None or b.free_index > idx)] if idx >= 0 else []
    return (live or list(r.peak.top))[:top]


def peak_site(r) -> str:
    """The file:line of the allocation that made the peak."""
    maker = next((b for b in r.blocks if b.alloc_index == r.peak.index), None)
    return (maker.stack or "(no Python stack: the autograd engine's thread)") if maker else ""


def untracked_above_peak(r) -> str | None:
    """When the allocator's max allocated is well above the tensors' peak (5 % and 64 MiB), the
    line that says why, so the two numbers do not read as a contradiction: memory no tensor holds
    (a CUDA library's workspace: cuDNN's benchmark search makes a CNN's peak), at its own moment."""
    a = r.allocator
    if a is None or r.peak.bytes <= 0 or any(n.startswith(UNTRACKED_PEAK_NOTE) for n in r.notes):
        return None  # (a GPU's run says it in its own note)
    above = a.untracked_peak_bytes  # what the backend found (0 where the allocator made the peak)
    if above < max(64 * 2**20, 0.05 * r.peak.bytes):
        return None
    where = ("; the snapshot names it" if r.profile_path else "")
    return (f"  max allocated is {format_bytes(above)} above this peak of the tensors: memory no "
            "tensor holds, at the allocator's own peak (CUDA libraries' workspaces, such as "
            f"cuDNN's for convolutions{where})")


def predicted_line(r) -> str | None:
    """A simulated run's answer, first: what the GPU's allocator would report, marked predicted,
    with the card named."""
    a = r.allocator
    if not r.simulated or a is None:
        return None
    when = "" if r.ok else f" until it stopped ({status_text(r.status)})"
    return (f"predicted on {r.device.name}{when}: max allocated "
            f"{format_bytes(a.peak_allocated_bytes)} ({a.peak_allocated_bytes:,} B), max "
            f"reserved {format_bytes(a.peak_reserved_bytes)} ({a.peak_reserved_bytes:,} B) "
            "(torch.cuda.max_memory_allocated / max_memory_reserved, as sim's allocator model "
            "predicts them)")


def render(r, top: int = 10) -> str:
    from .compiled import headline

    first = headline(r)  # a compiled script: which version these numbers are, first
    predicted = predicted_line(r)  # sim: the card's predicted counters
    out = [line for line in (first, predicted) if line]
    out.append(f"── {r.variant} ── {status_text(r.status)} · {provenance(r)}")
    if r.error:
        out.append(f"   {r.error}")
    reached = "peak" if r.ok else f"highest before it stopped ({status_text(r.status)})"
    out.append(f"{reached}: {format_bytes(r.peak.bytes)} ({r.peak.bytes:,} B) in "
               f"'{r.peak.phase or DASH}'")
    site = peak_site(r)
    if site:
        out.append(f"  made by: {site}")
    beyond = untracked_above_peak(r)
    if beyond:
        out.append(beyond)
    cats = sorted(((c, n) for c, n in r.peak.by_category.items() if n), key=lambda kv: -kv[1])
    if cats:
        out += ["", table(["live at the peak", "bytes", "exact"],
                          [[c, format_bytes(n), f"{n:,} B"] for c, n in cats], right={1, 2})]
    live = live_at_peak(r, top)
    if live:
        out += ["", f"largest storages live at the peak (of {len(r.blocks):,} kept)",
                table(["bytes", "category", "born in", "where"],
                      [[format_bytes(b.nbytes), b.category, b.phase or DASH, b.stack or DASH]
                       for b in live], right={0})]
    if r.phases:  # sim has no timing (the CPU's seconds of a fake run say nothing of the GPU's)
        timed = not r.simulated
        out += ["", table(["phase", "Δ tensors", "live at end", "peak in phase"]
                          + ["time"] * timed, _phase_rows(r, timed), right={1, 2, 3, 4})]
    if r.allocator and not predicted:
        a = r.allocator
        out.append(f"CUDA allocator: peak allocated {format_bytes(a.peak_allocated_bytes)} "
                   f"(max_memory_allocated), peak reserved {format_bytes(a.peak_reserved_bytes)}")
    if r.profile_path:
        out.append(f"memory snapshot: {r.profile_path} (pytorch.org/memory_viz, memlab view)")
    for n in r.notes[1:] if first else r.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


__all__ = ["live_at_peak", "peak_site", "predicted_line", "render", "untracked_above_peak"]
