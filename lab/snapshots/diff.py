"""Two runs, one question: where did the peak move? `memlab diff A B`, headless.

    d = diff_files("batch16.pkl", "batch2.pkl")
    d.peak_delta_bytes                      B's peak minus A's
    d.by_category_delta["activations"]      ... of which activations
    d.by_phase_delta, d.top_sites           by the phase and by the allocation site (file:line)
    d.headline                              "bf16 vs baseline: peak −2.10 GB (−18%): activations
                                             −2.40 GB, temporaries +0.30 GB"

A and B are each a memlab result (RunResult JSON: `memlab run --json`, `--save`, the H200
recordings in assets/reference, a `compare --json` comparison) or a memory snapshot
(`torch.cuda.memory._dump_snapshot`, or one memlab wrote with `--snapshot`; .pkl, .pickle,
.pkl.gz), in any mix. Everything is compared *at each side's own peak*: what was live there,
by category, phase and site. Snapshots are read as `open_summary` reads them (restricted
unpickler, every live block summarized); a raw
snapshot's categories are guesses from its stacks and lifetimes, and the diff says so. A result
keeps its largest storages only (1,000): what it does not itemise by phase and site is shown as
one "(smaller storages)" row, so every breakdown still adds up to the peak.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .load import SnapshotError, read
from .summary import SnapshotSummary, summarize
from .unpickle import gc_paused

SCHEMA = 1
ALL = 10**9  # summarize every block live at the peak (sites must add up)
SMALLER = "(smaller storages)"  # a result's storages beyond the ones it keeps


@dataclass
class Side:
    """One run at its peak."""

    file: str
    label: str  # "baseline", "batch16.pkl"
    source: str  # "memlab-result" | "pytorch-snapshot"
    status: str  # ok | oom | error | ...; "ok" for a snapshot
    peak_bytes: int
    peak_phase: str = ""
    peak_where: str = ""
    guessed: bool = False  # phases and categories guessed from stacks (a raw snapshot)
    provenance: str = ""
    by_category: dict[str, int] = field(default_factory=dict)
    by_phase: dict[str, int] = field(default_factory=dict)
    sites: dict[str, int] = field(default_factory=dict)
    allocator_peak_bytes: int | None = None  # cuda results: max_memory_allocated


@dataclass
class Site:
    where: str
    a_bytes: int
    b_bytes: int
    delta_bytes: int


@dataclass
class Diff:
    a: Side
    b: Side
    peak_delta_bytes: int
    peak_delta_frac: float | None
    by_category_delta: dict[str, int]
    by_phase_delta: dict[str, int]
    top_sites: list[Site]
    headline: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "kind": "diff", **asdict(self)}


# ---- the two sides -------------------------------------------------------------------------------
def side_of_summary(s: SnapshotSummary, label: str = "") -> Side:
    """A snapshot summary made with every live block (open_summary(..., top=ALL))."""
    sites: dict[str, int] = {}
    for a in s.live_at_peak:
        sites[a.where] = sites.get(a.where, 0) + a.bytes
    rest = s.peak_bytes - sum(sites.values())
    if rest > 0 and s.live_count > len(s.live_at_peak):
        sites[SMALLER] = rest
    return Side(s.file, label or Path(s.file).name, s.source, "ok", s.peak_bytes, s.peak_phase,
                s.peak_where, s.guessed, "a memory snapshot" + (" (categories guessed from "
                "stacks)" if s.guessed else " written by memlab (categories recorded)"),
                dict(s.by_category), dict(s.by_phase), sites)


def side_of_result(d: dict, file: str = "") -> Side:
    """A RunResult dict: categories are the tracker's own; phases and sites come from the
    storages it kept (the largest), the rest in one SMALLER row."""
    from lab.measure.result import RunResult  # plain dataclasses, no torch
    from lab.report import provenance

    r = RunResult.from_dict(d)
    idx = r.peak.index
    blocks = [b for b in r.blocks if b.alloc_index <= idx
              and (b.free_index is None or b.free_index > idx)] if idx >= 0 else []
    if not blocks:
        blocks = list(r.peak.top)  # an older result: the largest live at the peak
    by_phase: dict[str, int] = {}
    sites: dict[str, int] = {}
    for b in blocks:
        by_phase[b.phase or "(no phase)"] = by_phase.get(b.phase or "(no phase)", 0) + b.nbytes
        where = b.stack or "(no Python stack)"
        sites[where] = sites.get(where, 0) + b.nbytes
    rest = r.peak.bytes - sum(b.nbytes for b in blocks)
    if rest > 0:
        by_phase[SMALLER] = sites[SMALLER] = rest
    maker = next((b for b in r.blocks if b.alloc_index == idx), None)
    recorded = r.on_gpu and "reference" in Path(file).parts
    label = r.variant if r.lesson in ("", "playground", "profile") else f"{r.lesson} · {r.variant}"
    return Side(file, label, "memlab-result", r.status, r.peak.bytes, r.peak.phase,
                maker.stack if maker else "", False, provenance(r, recorded=recorded),
                {k: v for k, v in r.peak.by_category.items() if v}, by_phase, sites,
                r.allocator.peak_allocated_bytes if r.allocator else None)


def load_side(path: str | Path, *, variant: str | None = None, device: int | None = None) -> Side:
    """One side from a file. Several results in it need `variant`; raises SnapshotError."""
    kind, data = read(path)
    if kind == "snapshot":
        try:
            with gc_paused():  # millions of small dicts: no cyclic collection while reading
                s = summarize(data, device=device, file=str(path), top=ALL)
        except (TypeError, KeyError, AttributeError, ValueError) as e:
            raise SnapshotError(f"{path}: malformed snapshot ({type(e).__name__}: {e})") from None
        return side_of_summary(s)
    results = data.get("results", []) if isinstance(data, dict) and "results" in data else data
    results = results if isinstance(results, list) else [results]
    names = [str(r.get("variant")) for r in results]
    if variant is not None:
        results = [r for r in results if r.get("variant") == variant]
        if not results:
            raise SnapshotError(f"{path} has no variant {variant!r}; it has: {', '.join(names)}")
    if len(results) != 1:
        raise SnapshotError(f"{path} holds {len(results)} results ({', '.join(names)}); "
                            "pick one with --variant")
    try:
        return side_of_result(results[0], str(path))
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise SnapshotError(f"{path}: malformed result JSON ({type(e).__name__}: {e})") from None


# ---- the difference ------------------------------------------------------------------------------
def _delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    keys = sorted(set(a) | set(b), key=lambda k: (-abs(b.get(k, 0) - a.get(k, 0)), k))
    return {k: b.get(k, 0) - a.get(k, 0) for k in keys}


def headline(a: Side, b: Side, delta: int, frac: float | None, cats: dict[str, int]) -> str:
    """'bf16 vs baseline: peak −2.10 GB (−18%): activations −2.40 GB, temporaries +300.00 MB'."""
    from lab.report import percent, signed_bytes

    scale = max(a.peak_bytes, b.peak_bytes, 1)
    # the categories that moved by at least 1 % of the larger peak, largest first (at most 4)
    moved = [(k, v) for k, v in cats.items() if v and abs(v) >= 0.01 * scale][:4]
    parts = ", ".join(f"{k} {signed_bytes(v)}" for k, v in moved)
    frac_text = f" ({percent(frac)})" if frac is not None else ""
    return f"{b.label} vs {a.label}: peak {signed_bytes(delta)}{frac_text}" + (f": {parts}"
                                                                              if parts else "")


def short_site(where: str) -> str:
    """'transformers/models/gpt2/modeling_gpt2.py:276 forward' -> 'gpt2/modeling_gpt2.py:276
    forward': the tracker keeps the path after site-packages, a snapshot memlab wrote keeps two
    parts; sites of the two kinds only meet in the shorter form."""
    loc, sep, name = where.partition(" ")
    path, colon, line = loc.rpartition(":")
    if not colon or not line.isdigit():
        return where
    return f"{'/'.join(path.split('/')[-2:])}:{line}{sep}{name}"


def _sites(s: Side, short: bool) -> dict[str, int]:
    if not short:
        return s.sites
    out: dict[str, int] = {}
    for w, n in s.sites.items():
        k = short_site(w)
        out[k] = out.get(k, 0) + n
    return out


def diff(a: Side, b: Side, top: int = 10) -> Diff:
    delta = b.peak_bytes - a.peak_bytes
    frac = delta / a.peak_bytes if a.peak_bytes else None
    cats = _delta(a.by_category, b.by_category)
    short = not (a.guessed and b.guessed)  # two raw snapshots keep their longer paths
    sa, sb = _sites(a, short), _sites(b, short)
    sites = [Site(w, sa.get(w, 0), sb.get(w, 0), d) for w, d in _delta(sa, sb).items() if d][:top]
    notes = []
    for s in (a, b):
        if s.status != "ok":
            notes.append(f"{s.label}: status {s.status}; its peak is what was reached before "
                         "it stopped")
        if s.guessed:
            notes.append(f"{s.label}: a raw snapshot: phases and categories are guessed from "
                         "stacks and lifetimes (lab.snapshots.lifetimes)")
    if a.source != b.source:
        notes.append("one side is a memlab result (tensor bytes), the other a memory snapshot "
                     "(allocator blocks, rounded to 512 B on CUDA)")
    if a.allocator_peak_bytes and b.allocator_peak_bytes:
        from lab.report import signed_bytes

        notes.append("the CUDA allocator's own peaks (max_memory_allocated) differ by "
                     f"{signed_bytes(b.allocator_peak_bytes - a.allocator_peak_bytes)}")
    if a.by_phase and b.by_phase and not set(a.by_phase) & set(b.by_phase):
        notes.append("the two sides name their phases differently (a raw snapshot's phases "
                     "are guesses such as 'forward'; memlab's are 'forward 0')")
    return Diff(a, b, delta, frac, cats, _delta(a.by_phase, b.by_phase), sites,
                headline(a, b, delta, frac, cats), notes)


def diff_files(path_a: str | Path, path_b: str | Path, *, variants: tuple = (None, None),
               device: int | None = None, top: int = 10) -> Diff:
    """`memlab diff A B`. Raises SnapshotError with one line for a file it cannot read."""
    a = load_side(path_a, variant=variants[0], device=device)
    b = load_side(path_b, variant=variants[1], device=device)
    if a.source == b.source == "memlab-result" and " · " in a.label \
            and a.label.split(" · ")[0] == b.label.split(" · ")[0]:  # one lesson: the variants
        a.label, b.label = a.label.split(" · ", 1)[1], b.label.split(" · ", 1)[1]
    if a.label == b.label:  # the same name on both sides: name the folders, else A and B
        pa, pb = Path(a.file), Path(b.file)
        if pa.name == pb.name and pa.parent.name != pb.parent.name and a.source == b.source \
                == "pytorch-snapshot":
            a.label, b.label = f"{pa.parent.name}/{pa.name}", f"{pb.parent.name}/{pb.name}"
        else:
            a.label, b.label = f"A ({a.label})", f"B ({b.label})"
    return diff(a, b, top=top)


def dumps(d: Diff) -> str:
    return json.dumps(d.to_dict(), indent=1)


__all__ = ["ALL", "Diff", "SMALLER", "Side", "Site", "diff", "diff_files", "dumps", "headline",
           "load_side", "short_site", "side_of_result", "side_of_summary"]
