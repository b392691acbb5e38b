"""Result rows: one Δ-vs-baseline rule, and cells that never show a missing value as 0.

The rule (lessons, compare, exports, the app):
- the baseline is the variant named `baseline` (rule NAMED: a lesson's results) or the first row
  (rule FIRST: `memlab compare`, whose first --combo is the baseline); no such row, no Δ;
- a Δ exists only when the row and the baseline both ran ok (an OOM's peak is where it stopped,
  not what it needed) — except against a baseline that ran out of memory after reaching some
  bytes: it needed at least what it reached, so a variant that fits below that saved *at least*
  the difference, written as a bound ("≤−1.20 GB (≤−40%)", lesson 18);
- an OOM, a timeout, a cancelled or never-reached value is written as such ("OOM after
  2.20 GB", "cancelled", "not reached (OOM)"), never as 0, never as "×nan".

    rows = result_rows(results)                 # RunResult-shaped objects -> Row (with Δ)
    rows = with_deltas([Row("bf16", "ok", 1_200_000), ...], rule=FIRST)
    comparison_table(rows, references={"baseline": Row(...)}, reference_label="H200")
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from .tables import table
from .units import (DASH, exact_bytes, format_bytes, percent, seconds, signed_bytes,
                    signed_exact_bytes)

BASELINE = "baseline"
NAMED, FIRST = "named", "first"
STATUS_LABEL = {"ok": "ok", "oom": "OOM", "error": "error", "timeout": "timeout",
                "cancelled": "cancelled"}


@dataclass(frozen=True)
class Row:
    name: str  # the variant (lessons) or the combination (compare)
    status: str = "ok"  # ok | oom | error | timeout | cancelled
    peak_bytes: int | None = None  # None: nothing was measured
    peak_phase: str = ""
    step_time_s: float | None = None
    mode: str = ""
    scale: str = ""
    simulated: bool = False  # sim: no step times exist (not "not measured")
    is_baseline: bool = False
    delta_bytes: int | None = None  # vs the baseline, by the rule above
    delta_frac: float | None = None
    delta_bound: bool = False  # against a baseline that ran out of memory: at most this much

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def row_of(result) -> Row:
    """A RunResult (or anything shaped like one) as a Row without Δ."""
    peak = getattr(result, "peak", None)
    return Row(name=result.variant, status=result.status,
               peak_bytes=getattr(peak, "bytes", None), peak_phase=getattr(peak, "phase", ""),
               step_time_s=result.step_time_s, mode=result.mode, scale=result.scale,
               simulated=bool(getattr(result, "simulated", False)))


def baseline_index(names: Sequence[str], rule: str = NAMED) -> int | None:
    if rule == FIRST:
        return 0 if names else None
    if rule != NAMED:
        raise ValueError(f"unknown baseline rule {rule!r}; use {NAMED!r} or {FIRST!r}")
    return next((i for i, n in enumerate(names) if n == BASELINE), None)


def difference(row: Row, other: Row | None) -> tuple[int | None, float | None]:
    """row − other in bytes and as a fraction of other, when both ran ok; else (None, None)."""
    if other is None or not (row.ok and other.ok) or row.peak_bytes is None \
            or other.peak_bytes is None:
        return None, None
    d = row.peak_bytes - other.peak_bytes
    return d, (d / other.peak_bytes if other.peak_bytes else None)


def bound_against(row: Row, base: Row | None) -> tuple[int | None, float | None]:
    """row − base when base ran out of memory after reaching some bytes and row fits below
    them: an upper bound on the difference (base needed more than it reached)."""
    if base is None or base.status != "oom" or not base.peak_bytes or not row.ok \
            or row.peak_bytes is None or row.peak_bytes >= base.peak_bytes:
        return None, None
    d = row.peak_bytes - base.peak_bytes
    return d, d / base.peak_bytes


def with_deltas(rows: Sequence[Row], rule: str = NAMED) -> list[Row]:
    i = baseline_index([r.name for r in rows], rule)
    base = rows[i] if i is not None else None
    out = []
    for k, r in enumerate(rows):
        if k == i:
            out.append(replace(r, is_baseline=True, delta_bytes=None, delta_frac=None,
                               delta_bound=False))
            continue
        d, f = difference(r, base)
        bound = False
        if d is None:
            d, f = bound_against(r, base)
            bound = d is not None
        out.append(replace(r, is_baseline=False, delta_bytes=d, delta_frac=f, delta_bound=bound))
    return out


def delta_note(rows: Sequence[Row]) -> str | None:
    """What the Δ column cannot say by itself: a baseline that stopped (said once, under it)."""
    base = next((r for r in rows if r.is_baseline), None)
    if base is None or base.ok:
        return None
    if any(r.delta_bound for r in rows):
        return ("the baseline ran out of memory: Δ is against what it reached (≤: at least that "
                "much less)")
    return "the baseline did not finish: no Δ to compare with"


def result_rows(results: Iterable, rule: str = NAMED) -> list[Row]:
    return with_deltas([row_of(r) for r in results], rule)


# ---- cells -------------------------------------------------------------------------------------
def status_text(status: str) -> str:
    return STATUS_LABEL.get(status, status)


def peak_text(row: Row, digits: int = 2) -> str:
    """'4.40 GB'; 'OOM after 2.20 GB' (where it stopped); 'cancelled' (nothing measured)."""
    if row.ok:
        return format_bytes(row.peak_bytes, digits=digits)
    if row.peak_bytes:
        return f"{status_text(row.status)} after {format_bytes(row.peak_bytes, digits=digits)}"
    return status_text(row.status)


def vs_text(d: int | None, frac: float | None, digits: int = 2) -> str:
    """'−2.00 MB (−5%)', or '—' when there is no difference to show."""
    if d is None:
        return DASH
    return signed_bytes(d, digits) + (f" ({percent(frac)})" if frac is not None else "")


def delta_text(row: Row, digits: int = 2) -> str:
    """'(baseline)', '−2.00 MB (−5%)', a bound '≤−1.20 GB (≤−40%)', or '—'."""
    if row.is_baseline:
        return "(baseline)"
    if row.delta_bound and row.delta_bytes is not None:
        return (f"≤{signed_bytes(row.delta_bytes, digits)}"
                + (f" (≤{percent(row.delta_frac)})" if row.delta_frac is not None else ""))
    return vs_text(row.delta_bytes, row.delta_frac, digits)


def step_text(row: Row) -> str:
    if row.step_time_s is not None:
        return seconds(row.step_time_s)
    return "none (sim)" if row.simulated else DASH


def reference_cells(row: Row, ref: Row | None, digits: int = 2) -> list[str]:
    """[the recording's peak, row − recording]: compared only at the same scale, both ok."""
    if ref is None:
        return [DASH, DASH]
    if row.scale and ref.scale and row.scale != ref.scale:
        return [peak_text(ref, digits), f"other scale ({ref.scale})"]
    return [peak_text(ref, digits), vs_text(*difference(row, ref), digits)]


def comparison_table(rows: Sequence[Row], references: dict[str, Row] | None = None,
                     reference_label: str = "H200", markdown: bool = False,
                     name_header: str = "variant", digits: int = 2) -> str:
    """variant · status · peak · Δ vs baseline · peak phase · step time [· recorded peak · vs it]."""
    headers = [name_header, "status", "peak", "Δ vs baseline", "peak phase", "step time"]
    if references:
        headers += [f"{reference_label} peak (recorded)", f"vs {reference_label}"]
    body = []
    for r in rows:
        cells = [r.name, status_text(r.status), peak_text(r, digits), delta_text(r, digits),
                 r.peak_phase or DASH, step_text(r)]
        if references:
            cells += reference_cells(r, references.get(r.name), digits)
        body.append(cells)
    return table(headers, body, right={2, 3, 5, 6, 7}, markdown=markdown)


# ---- checks: expected (from the formula) vs measured, to the byte ----------------------------------
CHECK_HEADERS = ["check", "expected", "measured", "difference", "measured by"]


def check_cells(check, run_status: str = "ok") -> list[str]:
    """[name, expected, measured, difference, source] for a lesson check (a Check-shaped object).
    In a run that stopped early, a check measured as 0 was never reached: said so."""
    expected, measured = check.expected_bytes, check.measured_bytes
    if run_status != "ok" and not measured and expected:
        return [check.name, exact_bytes(expected), f"not reached ({status_text(run_status)})",
                DASH, check.source]
    d = measured - expected
    diff = "none" if d == 0 else signed_exact_bytes(d) + (
        f" ({percent(d / expected)})" if expected else "")
    return [check.name, exact_bytes(expected), exact_bytes(measured), diff, check.source]


def check_gap(check, digits: int = 2) -> str:
    """measured − expected, rounded like every size: 'none', '+683.20 kB (+0.0026%)'."""
    d = check.measured_bytes - check.expected_bytes
    if d == 0:
        return "none"
    return vs_text(d, d / check.expected_bytes if check.expected_bytes else None, digits)


def checks_table(checks: Iterable, run_status: str = "ok", markdown: bool = False) -> str:
    return table(CHECK_HEADERS, [check_cells(c, run_status) for c in checks], right={1, 2, 3},
                 markdown=markdown)


__all__ = ["BASELINE", "CHECK_HEADERS", "FIRST", "NAMED", "Row", "STATUS_LABEL",
           "baseline_index", "bound_against", "check_cells", "check_gap", "checks_table", "comparison_table",
           "delta_note", "delta_text",
           "difference", "peak_text", "reference_cells", "result_rows", "row_of", "status_text",
           "step_text", "vs_text", "with_deltas"]
