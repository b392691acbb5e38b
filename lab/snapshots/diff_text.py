"""A `Diff` as plain text: the headline, then category, phase and site tables (A, B, Δ).

Units and tables come from lab.report (one policy: GB = 10**9, signed differences with a real
minus); nothing here formats a byte by itself.
"""

from __future__ import annotations

from lab.report import format_bytes, percent, signed_bytes, table

from .diff import Diff, Side


def _side_line(tag: str, s: Side) -> str:
    status = "" if s.status == "ok" else f" · status {s.status}"
    where = f" · made at {s.peak_where}" if s.peak_where else ""
    phase = f" in {s.peak_phase}" if s.peak_phase else ""
    return (f"{tag} {s.label}: peak {format_bytes(s.peak_bytes)}{phase}{where}{status} — "
            f"{s.provenance} ({s.file})")


def _rows(d: Diff, a: dict[str, int], b: dict[str, int], delta: dict[str, int],
          top: int | None = None) -> list[list[str]]:
    peak = max(abs(d.peak_delta_bytes), 1)
    rows = []
    for k, v in list(delta.items())[:top]:
        share = percent(v / peak, signed=False) if d.peak_delta_bytes and v else ""
        rows.append([k, format_bytes(a.get(k, 0)), format_bytes(b.get(k, 0)), signed_bytes(v),
                     share])
    return rows


def render(d: Diff, top: int = 10) -> str:
    a, b = d.a, d.b
    out = [d.headline, "", _side_line("A", a), _side_line("B", b), ""]
    frac = f" ({percent(d.peak_delta_frac)})" if d.peak_delta_frac is not None else ""
    out.append(f"peak: {format_bytes(a.peak_bytes)} → {format_bytes(b.peak_bytes)}, "
               f"{signed_bytes(d.peak_delta_bytes)}{frac}; each side at its own peak")
    heads = ["", "A", "B", "Δ (B − A)", "of Δ"]
    cat_label = "category (B's guessed)" if b.guessed else "category"
    if a.guessed and not b.guessed:
        cat_label = "category (A's guessed)"
    elif a.guessed and b.guessed:
        cat_label = "category (guessed)"
    sections = [(cat_label, a.by_category, b.by_category, d.by_category_delta, None),
                ("phase", a.by_phase, b.by_phase, d.by_phase_delta, top)]
    for name, da, db, delta, n in sections:
        out += ["", table([name] + heads[1:], _rows(d, da, db, delta, n), right={1, 2, 3, 4})]
    if d.top_sites:
        sites = {s.where: s.delta_bytes for s in d.top_sites}
        rows = _rows(d, {s.where: s.a_bytes for s in d.top_sites},
                     {s.where: s.b_bytes for s in d.top_sites}, sites)
        out += ["", f"allocation sites that moved most (top {len(rows)}, by the first frame "
                    "outside torch)", table(["where"] + heads[1:], rows, right={1, 2, 3, 4})]
    for n in d.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


__all__ = ["render"]
