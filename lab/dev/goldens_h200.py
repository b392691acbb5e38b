"""The sim goldens against the H200: the bars of docs/SIMULATION.md.

    h200_misses(entry, fields)   a line for every bar a golden's (or a run's) numbers miss

A lesson variant is judged against its recording (assets/reference/<lesson>/<variant>.json, only
the files asked for: they carry timelines, a lesson's folder is megabytes); the plain loop
against the H200 ground truth of bench/h200_ground_truth.py (assets/ground_truth). Judging the
simulator, this may read the recordings; the simulator never does (tests/unit/test_no_peeking.py).
"""

from __future__ import annotations

import functools
import json

from lab.paths import ASSETS_DIR

from .goldens import SUBSET, Entry, PlainEntry, load_golden

GROUND_TRUTH = ASSETS_DIR / "ground_truth" / "h200_hf_loop.json"
# The bars sim is held to against the H200 (docs/SIMULATION.md, bench/sim_vs_h200.py), in %
BAR_PEAK, BAR_RATIO, BAR_ALLOCATED, BAR_RESERVED = 1.0, 2.0, 2.0, 5.0


def _pct(a: int | None, b: int | None) -> float | None:
    return None if not a or not b else 100.0 * (a - b) / b


def h200_misses(e: Entry | PlainEntry, fields: dict, baseline_peak: int | None = None) -> list[str]:
    """Where `fields` miss the H200's numbers by more than the bars (docs/SIMULATION.md); the
    recording not found is a miss too. `baseline_peak`: sim's peak of the lesson's baseline (its
    golden), for the ratio bar."""
    h = h200_numbers(e)
    if h is None:
        return [f"{e.name}: no H200 recording to compare with"]
    out = []
    if fields["status"] != h["status"]:
        out.append(f"{e.name}: status: H200 {h['status']}, sim {fields['status']}")
    got_alloc = (fields.get("allocator") or {})
    rows = [("allocated", got_alloc.get("peak_allocated_bytes"), h["allocated"], BAR_ALLOCATED),
            ("reserved", got_alloc.get("peak_reserved_bytes"), h["reserved"], BAR_RESERVED)]
    if h.get("peak") is not None:
        rows.insert(0, ("tracked peak", fields["peak"]["bytes"], h["peak"], BAR_PEAK))
    for what, got, ref, bar in rows:
        err = _pct(got, ref)
        if err is None or abs(err) > bar:
            out.append(f"{e.name}: {what}: H200 {ref}, sim {got} "
                       f"({'-' if err is None else f'{err:+.3f} %'}; the bar is {bar} %)")
    if baseline_peak and h.get("baseline_peak") and h["peak"]:
        err = _pct(fields["peak"]["bytes"] / baseline_peak, h["peak"] / h["baseline_peak"])
        if err is None or abs(err) > BAR_RATIO:
            off = "-" if err is None else f"{err:+.3f} %"
            out.append(f"{e.name}: peak / baseline's peak: {off} from the H200's ratio "
                       f"(the bar is {BAR_RATIO} %)")
    return out


def h200_numbers(e: Entry | PlainEntry) -> dict | None:
    """The H200's status, tracked peak, max allocated / reserved (and its baseline's peak)."""
    if isinstance(e, PlainEntry):
        cases = json.loads(GROUND_TRUTH.read_text(encoding="utf-8"))["peak"]
        for c in cases:
            if (c["model"], c["combo"], c["batch"], c["seq"]) == (e.model, e.combo, e.batch, e.seq):
                return {"status": c["status"], "peak": None, "allocated": c["max_allocated"],
                        "reserved": c["max_reserved"]}
        return None
    r = _recording(e.lesson, e.variant)
    if r is None:
        return None
    base = _recording(e.lesson, "baseline") if e.variant != "baseline" else None
    a = r.allocator
    return {"status": r.status, "peak": r.peak.bytes,
            "allocated": a.peak_allocated_bytes if a else None,
            "reserved": a.peak_reserved_bytes if a else None,
            "baseline_peak": base.peak.bytes if base else None}


@functools.lru_cache(maxsize=64)
def _recording(lesson: str, variant: str):
    """An H200 recording (through the result schema), or None."""
    from lab.course.reference import load_recording

    return load_recording(lesson, variant)


def baseline_golden_peak(e: Entry | PlainEntry) -> int | None:
    """Sim's peak of the lesson's baseline as its golden has it (for the ratio bar)."""
    if isinstance(e, PlainEntry) or e.variant == "baseline":
        return None
    base = next((x for x in SUBSET if isinstance(x, Entry) and x.lesson == e.lesson
                 and x.variant == "baseline"), None)
    doc = load_golden(base) if base is not None else None
    return doc["sim"]["peak"]["bytes"] if doc else None


__all__ = ["BAR_ALLOCATED", "BAR_PEAK", "BAR_RATIO", "BAR_RESERVED", "baseline_golden_peak",
           "h200_misses"]
