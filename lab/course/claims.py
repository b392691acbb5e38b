"""Claims: every number or direction a lesson states, as data checked against recorded runs.

A lesson's text never types a measured number. It writes `{{bf16-peak}}`, and lesson.toml says
what that is:

    [[claims]]
    id = "bf16-peak"          # the placeholder's name
    variant = "bf16"          # whose number
    quantity = "peak"         # which number of its RunResult (QUANTITIES below)
    value = "12.24 GB"        # what the text states; checked against the recording by rounding
    # mode = "cuda"           # which recording backs it (default: the H200's, assets/reference)
    # source = "ground_truth" # backed instead by the H200 ground truth (lab.course.ground_truth): the
    #                         case the variant names (its `ground_truth`), which records only
    #                         allocated, reserved and status; the lesson's own recording is not
    #                         needed (a lesson that runs the same loop as a recorded case)
    # relative_to = "baseline"  value "−18 %" (change), "2.6×" (ratio) or "−2.70 GB" (difference)
    # direction = "lower"     lower | higher | same | equal, vs relative_to; renders as a word
    # says = "lowers"         the word(s) the text uses for the direction (checked for sense)
    # tolerance = 0.03        relative slack: for a value (default none: it reads as recorded),
    #                         or for direction "same" (default 0.5 %)
    # also = ["sim", "cpu"]   modes whose fresh runs must show the same direction (tests run them)
    # superseded = "2026-11-30"  an earlier H200 recording, kept in assets/superseded/<date>/:
    #                         what a method the lab no longer uses measured (a lesson that says
    #                         what changed cites both, each checked against its own recording)

Values are compared the way a reader compares them: the recorded quantity, written with the same
unit and decimals as the stated value, must read the same ("12.24 GB" backs 12.236e9 and 12.244e9
bytes, not 12.25e9). Step times too: the text sits beside the table `memlab dev cite` renders from
the same recording, so "66 ms" cannot stand for a recorded 63.7 ms.

A step time is noisy where bytes are not, so a step-time direction compares the two runs'
timed steps (`timing`: every step of the untracked pass, warm-up left out), not two numbers:
- "faster"/"slower" (direction lower or higher): every timed step of one run is beyond every
  timed step of the other, with enough steps for that to mean something (a rank test: with
  Mann-Whitney's U = 0 its exact two-sided p is 2 / C(n + m, n), at most SIGNIFICANCE; five steps
  against five give 0.008). Otherwise the text states the numbers without a direction;
- "about the same" (direction same): the opposite holds - the timed steps do not fall apart that
  way - and the medians are within `tolerance`;
- a recording without `timing` (the mean of 2-3 steps, step 0 included, recorded once: lesson 22's
  schema-1 recordings) backs no step-time direction at all.
A run on several ranks contributes every rank's timed steps. `step_min` and `step_max` (the
fastest and slowest timed step) let the text say how the steps fell.

Torch-free: the CLI's `memlab dev check` runs without importing torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from lab.measure.modes import MODES, mode_info

BYTE_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
              "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}
TIME_UNITS = {"ms": 1e-3, "s": 1.0}
DIRECTIONS = ("lower", "higher", "same", "equal")
DIRECTION_WORDS = {  # how a direction renders, and the words `says` may use for it
    "lower": ("lower", {"lower", "lowers", "less", "smaller", "fewer", "below", "down", "saves",
                        "shrinks", "cuts", "falls", "drops", "reduces", "frees", "halves",
                        "halved", "faster", "shorter", "quicker"}),
    "higher": ("higher", {"higher", "raises", "more", "larger", "above", "up", "grows",
                          "increases", "adds", "rises", "costs", "doubles", "doubled",
                          "longer", "slower"}),
    "same": ("about the same", {"same", "unchanged", "equal", "identical", "matches", "as"}),
    "equal": ("exactly the same", {"same", "unchanged", "equal", "identical", "exactly"}),
}
QUANTITIES = ("peak | peak_phase | allocated | reserved | nvml | step_time | step_spread | step_min | "
              "step_max | status | largest | category:<name> | category:<name>:max | "
              "phase:<name>:delta | phase:<name>:peak | phase:<name>:largest | metric:<name> | "
              "check:<name> | rank:<n>:<any of these>")
_PLAIN = ("peak", "peak_phase", "allocated", "reserved", "nvml", "step_time", "step_spread",
          "step_min", "step_max", "status", "largest")
_VALUE_RE = re.compile(r"^\s*([+\-−]?)\s*(\d[\d,]*(?:\.\d+)?)\s*([A-Za-z%×]*)\s*$")
SUPERSEDED_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
SOURCES = ("recording", "ground_truth")  # what backs a claim: the lesson's H200 recording, or
# the ground-truth case its variant names (lab.course.ground_truth)
GROUND_TRUTH_QUANTITIES = ("allocated", "reserved", "status")  # lab.course.ground_truth.QUANTITIES
SAME_TOLERANCE = 0.005  # "about the same": within 0.5 %
# a step-time direction is a finding when a rank test on the timed steps gives p at most this
# (two-sided): all of one run's steps beyond all of the other's, five against five, is p = 0.008
SIGNIFICANCE = 0.01


class ClaimError(ValueError):
    """A claim that cannot be read (bad value, unknown quantity); one line."""


@dataclass(frozen=True)
class Claim:
    id: str
    variant: str
    quantity: str
    value: str | None = None
    mode: str = "cuda"
    relative_to: str | None = None
    direction: str | None = None
    says: str | None = None
    tolerance: float | None = None
    also: tuple[str, ...] = ()
    superseded: str | None = None  # the date of an earlier recording it states (see above)
    source: str = "recording"  # or "ground_truth" (see above)

    def rendered(self) -> str:
        """What `{{id}}` becomes in the lesson text."""
        if self.says:
            return self.says
        if self.value is not None:
            return self.value.replace("-", "−") if self.value.lstrip().startswith("-") else self.value
        return DIRECTION_WORDS[self.direction][0] if self.direction else self.id


@dataclass(frozen=True)
class Stated:
    """A parsed value: sign × number in `unit`; `decimals` as written."""

    number: float
    unit: str  # "", a byte unit, a time unit, "%", "×", or "status"
    decimals: int
    text: str


def parse_value(text: str, quantity: str = "") -> Stated:
    raw = str(text).strip()
    if quantity == "peak_phase":
        return Stated(0.0, "phase", 0, raw)
    if raw in ("ok", "oom", "error", "timeout"):
        return Stated(0.0, "status", 0, raw)
    m = _VALUE_RE.match(raw)
    if not m:
        raise ClaimError(f"value {text!r}: write a number with a unit, e.g. '12.24 GB', '−18 %', "
                         "'2.6×', '66 ms', or a status (ok, oom)")
    sign, digits, unit = m.groups()
    unit = {"x": "×", "bytes": "B"}.get(unit, unit)
    if unit and unit not in BYTE_UNITS and unit not in TIME_UNITS and unit not in ("%", "×"):
        raise ClaimError(f"value {text!r}: unknown unit {unit!r}; use B, kB, MB, GB, KiB, MiB, GiB, "
                         "ms, s, %, ×")
    number = float(digits.replace(",", "")) * (-1 if sign in ("-", "−") else 1)
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return Stated(number, unit, decimals, raw)


def quantity(result: Any, name: str) -> float | str | None:
    """The named number of a RunResult (or its dict), None when the run did not produce it."""
    r = result
    a = getattr(r, "allocator", None)
    if name == "peak":
        return r.peak.bytes if r.status == "ok" or r.peak.bytes else None
    if name == "allocated":
        return a.peak_allocated_bytes if a else None
    if name == "reserved":
        return a.peak_reserved_bytes if a else None
    if name == "nvml":
        return a.nvml_used_bytes if a else None
    if name == "step_time":
        return r.step_time_s
    if name == "step_spread":  # max - min of the timed steps: how far one step can be from another
        return spread_s(r)
    if name in ("step_min", "step_max"):  # the fastest / slowest timed step
        steps = timed_steps(r)
        return (min(steps) if name == "step_min" else max(steps)) if steps else None
    if name == "status":
        return r.status
    if name == "peak_phase":
        return r.peak.phase or None
    if name == "largest":  # the largest storage the run made (the tracker's blocks)
        return max((b.nbytes for b in r.blocks), default=None)
    kind, _, rest = name.partition(":")
    if kind == "rank":  # rank:<n>:<quantity>: rank n's own result of a run on several ranks
        n, _, inner = rest.partition(":")
        if not (n.isascii() and n.isdigit()):
            raise ClaimError(f"quantity {name!r}: use {QUANTITIES}")
        ranks = getattr(r, "ranks", None) or []
        return quantity(ranks[int(n)], inner) if int(n) < len(ranks) else None
    if kind == "category" and rest.endswith(":max"):  # the most of it held at any one time
        series = r.timeline.by_category.get(rest[:-4])
        if series is None:
            return 0 if r.timeline.live else None  # a timeline without it: none was held
        return max(series, default=0)
    if kind == "category":
        return r.peak.by_category.get(rest, 0) if r.peak.bytes else None
    if kind == "metric":
        return r.metrics.get(rest)
    if kind == "check":
        c = r.check(rest)
        return c.measured_bytes if c else None
    if kind == "phase":
        phase_name, _, field = rest.rpartition(":")
        p = r.phase(phase_name)
        if p is None:
            return None
        if field == "largest":  # the largest storage made in the phase (None: none listed)
            return max((b.nbytes for b in r.blocks if b.phase == phase_name), default=None)
        return {"delta": p.delta_bytes, "peak": p.peak_bytes}.get(field)
    raise ClaimError(f"quantity {name!r}: use {QUANTITIES}")


def check_quantity_name(name: str) -> None:
    kind, sep, rest = name.partition(":")
    if name in _PLAIN:
        return
    if kind == "rank":
        n, _, inner = rest.partition(":")
        # ASCII digits: '¹'.isdigit() is true, and int('¹') raises where the rank is read
        if n.isascii() and n.isdigit() and inner and not inner.startswith("rank:"):
            check_quantity_name(inner)
            return
    if sep and kind in ("category", "metric", "check") and rest and rest != ":max":
        return
    if kind == "phase" and rest.rpartition(":")[2] in ("delta", "peak", "largest") \
            and rest.rpartition(":")[0]:
        return
    raise ClaimError(f"quantity {name!r}: use {QUANTITIES}")


def _reads_as(measured: float, stated: Stated, tolerance: float | None) -> bool:
    """Does `measured` (in the stated unit already) read as the stated number?"""
    if tolerance:
        return abs(measured - stated.number) <= tolerance * abs(stated.number) + 0.5 * 10 ** -stated.decimals
    return round(measured, stated.decimals) == round(stated.number, stated.decimals)


def _backing(claim: Claim) -> str:
    return "ground truth" if claim.source == "ground_truth" else f"{claim.mode} recording"


def verify(claim: Claim, results: dict[str, Any]) -> str | None:
    """None when the recordings back the claim, else a one-line reason."""
    run = results.get(claim.variant)
    if run is None:
        return f"no {_backing(claim)} of variant {claim.variant!r}"
    base = None
    if claim.relative_to:
        base = results.get(claim.relative_to)
        if base is None:
            return f"no {_backing(claim)} of variant {claim.relative_to!r}"
    mine = quantity(run, claim.quantity)
    if mine is None:
        return f"{claim.variant}: the recording has no {claim.quantity} (status {run.status})"
    theirs = quantity(base, claim.quantity) if base is not None else None
    if base is not None and theirs is None:
        return f"{claim.relative_to}: the recording has no {claim.quantity} (status {base.status})"
    if claim.value is not None:
        problem = _check_value(claim, parse_value(claim.value, claim.quantity), mine, theirs)
        if problem:
            return problem
    if claim.direction:
        problem = _check_direction(claim, mine, theirs) or timing_problem(claim, run, base)
        if problem:
            return problem
    return None


def _check_value(claim: Claim, stated: Stated, mine, theirs) -> str | None:
    if stated.unit in ("status", "phase"):
        return None if mine == stated.text else f"{claim.variant} {claim.quantity} is {mine!r}, the text says {stated.text!r}"
    if isinstance(mine, str):
        return f"{claim.quantity} is text ({mine!r}); state it as ok/oom"
    tol = claim.tolerance
    if stated.unit in ("%", "×"):
        if theirs is None or not theirs:
            return f"{stated.text!r} is relative: give relative_to (the variant it compares with)"
        measured = (mine - theirs) / theirs * 100 if stated.unit == "%" else mine / theirs
    else:
        x = mine - theirs if theirs is not None else mine
        if stated.unit in BYTE_UNITS:
            measured = x / BYTE_UNITS[stated.unit]
        elif stated.unit in TIME_UNITS:
            measured = x / TIME_UNITS[stated.unit]
        else:
            measured = x
    if _reads_as(measured, stated, tol):
        return None
    shown = f"{measured:.{stated.decimals}f}{(' ' + stated.unit) if stated.unit else ''}"
    what = f"{claim.variant} vs {claim.relative_to}" if theirs is not None else claim.variant
    return f"{what} {claim.quantity}: the {_backing(claim)} reads {shown}, the text says {stated.text!r}"


def _check_direction(claim: Claim, mine, theirs) -> str | None:
    if isinstance(mine, str) or isinstance(theirs, str):
        return f"{claim.quantity} is text: it has no direction"
    if claim.direction not in DIRECTIONS:
        return f"direction {claim.direction!r}: use {', '.join(DIRECTIONS)}"
    if theirs is None:
        return "a direction needs relative_to (the variant it compares with)"
    if claim.says:
        words = set(re.findall(r"[a-z]+", claim.says.lower()))
        if not words & DIRECTION_WORDS[claim.direction][1]:
            return (f"says {claim.says!r} does not read as {claim.direction!r} "
                    f"(e.g. {', '.join(sorted(DIRECTION_WORDS[claim.direction][1])[:5])})")
    return direction_problem(claim, float(mine), float(theirs))


def direction_problem(claim: Claim, mine: float, theirs: float) -> str | None:
    """The direction part alone (also used on fresh sim/cpu runs, whose values are not stated)."""
    tol = claim.tolerance if claim.tolerance is not None else SAME_TOLERANCE
    ok = {"lower": mine < theirs * (1 - 1e-4), "higher": mine > theirs * (1 + 1e-4),
          "same": abs(mine - theirs) <= tol * abs(theirs), "equal": mine == theirs}[claim.direction]
    if ok:
        return None
    return (f"{claim.variant} {claim.quantity} {mine:,.6g} vs {claim.relative_to} {theirs:,.6g}: "
            f"not {claim.direction}")


def spread_s(result: Any) -> float | None:
    """The recorded spread of a run's timed steps (None: no `timing`, or fewer than two steps)."""
    timing = getattr(result, "timing", None)
    return timing.spread_s if timing is not None else None


def timed_steps(result: Any) -> list[float]:
    """Every timed step of a run, on every rank of a run on several ([] without `timing`)."""
    ranks = getattr(result, "ranks", None) or []
    runs = ranks if ranks and all(getattr(r, "timing", None) for r in ranks) else [result]
    return [s for r in runs if getattr(r, "timing", None) for s in r.timing.steps_s]


def rank_test_p(a: list[float], b: list[float]) -> float | None:
    """The exact two-sided p of a rank test (Mann-Whitney) when every step of one list is beyond
    every step of the other (U = 0): 2 / C(n + m, n); None when the two lists overlap or tie."""
    if not a or not b or not (max(a) < min(b) or max(b) < min(a)):
        return None
    return min(1.0, 2 / math.comb(len(a) + len(b), len(a)))


def _steps_of(result: Any, name: str) -> tuple[Any, str]:
    """The run a step-time quantity reads (rank:<n>:step_time reads rank n) and its base name."""
    if name.startswith("rank:"):
        n, _, inner = name[len("rank:"):].partition(":")
        ranks = getattr(result, "ranks", None) or []
        return (ranks[int(n)] if int(n) < len(ranks) else result), inner
    return result, name


def timing_problem(claim: Claim, run: Any, base: Any) -> str | None:
    """A step-time direction compares the two runs' timed steps (see the module docstring)."""
    if claim.direction not in ("lower", "higher", "same") or base is None:
        return None
    run, name = _steps_of(run, claim.quantity)
    base, _ = _steps_of(base, claim.quantity)
    if name != "step_time":
        return None
    mine, theirs = timed_steps(run), timed_steps(base)
    if not mine or not theirs:
        untimed = claim.variant if not mine else claim.relative_to
        return (f"{untimed}'s recording has no timed steps (`timing`): it backs no step-time "
                "direction; state the numbers without one")
    p = rank_test_p(mine, theirs)
    apart = p is not None and p <= SIGNIFICANCE
    where = (f"{claim.variant}'s {len(mine)} timed steps {min(mine) * 1e3:.1f}-{max(mine) * 1e3:.1f} "
             f"ms, {claim.relative_to}'s {len(theirs)} {min(theirs) * 1e3:.1f}-"
             f"{max(theirs) * 1e3:.1f} ms")
    if claim.direction == "same":
        if apart:
            side = "below" if max(mine) < min(theirs) else "above"
            return (f"{where}: every one of {claim.variant}'s is {side} every one of "
                    f"{claim.relative_to}'s (p = {p:.3f}): not the same; state the direction")
        return None
    if apart:
        return None
    why = ("they overlap" if p is None else
           f"too few steps for that to be a finding (p = {p:.3f} > {SIGNIFICANCE})")
    return f"{where}: {why}; state the numbers without a direction"


def claim_from_toml(d: dict[str, Any]) -> Claim:
    """Build and validate one [[claims]] table (raises ClaimError with the field at fault)."""
    for key in ("id", "variant", "quantity"):
        if not isinstance(d.get(key), str) or not d[key]:
            raise ClaimError(f"{key}: missing (a claim names its id, variant and quantity)")
    if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", d["id"]):
        raise ClaimError(f"id {d['id']!r}: lowercase letters, digits, '-', '_' and '.'")
    check_quantity_name(d["quantity"])
    value = d.get("value")
    if value is not None:
        value = str(value)
        parse_value(value, d["quantity"])
    direction = d.get("direction")
    if direction is not None and direction not in DIRECTIONS:
        raise ClaimError(f"direction {direction!r}: use {', '.join(DIRECTIONS)}")
    if value is None and direction is None:
        raise ClaimError("states nothing: give a value, a direction, or both")
    if direction and not d.get("relative_to"):
        raise ClaimError("direction needs relative_to (the variant it compares with)")
    mode = d.get("mode", "cuda")
    if mode not in MODES:
        raise ClaimError(f"mode {mode!r}: use {', '.join(MODES)}")
    also = tuple(d.get("also", ()))
    for m in also:
        if m not in MODES:
            raise ClaimError(f"also {m!r}: use {', '.join(MODES)}")
    if also and not direction:
        raise ClaimError("also checks a direction on fresh runs: give a direction")
    superseded = d.get("superseded")
    if superseded is not None:
        if not (isinstance(superseded, str) and SUPERSEDED_RE.fullmatch(superseded)):
            raise ClaimError(f"superseded {superseded!r}: the date of the earlier recording, "
                             "YYYY-MM-DD (its folder in assets/superseded/)")
        if also or not mode_info(mode).on_gpu:
            raise ClaimError("superseded states an earlier H200 recording: no also, mode cuda")
    source = d.get("source", "recording")
    if source not in SOURCES:
        raise ClaimError(f"source {source!r}: use {', '.join(SOURCES)}")
    if source == "ground_truth":
        if d["quantity"] not in GROUND_TRUTH_QUANTITIES:
            raise ClaimError(f"quantity {d['quantity']!r}: the ground truth records only "
                             f"{', '.join(GROUND_TRUTH_QUANTITIES)}")
        if superseded is not None or not mode_info(mode).on_gpu:
            raise ClaimError("source ground_truth states the H200's ground truth: no superseded, "
                             "mode cuda")
    tol = d.get("tolerance")
    if tol is not None and not (isinstance(tol, (int, float)) and 0 <= tol < 1):
        raise ClaimError(f"tolerance {tol!r}: a fraction between 0 and 1")
    unknown = set(d) - {"id", "variant", "quantity", "value", "mode", "relative_to", "direction",
                        "says", "tolerance", "also", "superseded", "source"}
    if unknown:
        raise ClaimError(f"unknown field(s) {', '.join(sorted(unknown))}")
    return Claim(id=d["id"], variant=d["variant"], quantity=d["quantity"], value=value, mode=mode,
                 relative_to=d.get("relative_to"), direction=direction, says=d.get("says"),
                 tolerance=tol, also=also, superseded=superseded, source=source)


__all__ = ["Claim", "ClaimError", "DIRECTIONS", "GROUND_TRUTH_QUANTITIES", "QUANTITIES",
           "SIGNIFICANCE", "SOURCES", "Stated",
           "claim_from_toml", "direction_problem", "parse_value", "quantity", "rank_test_p",
           "spread_s", "timed_steps", "timing_problem", "verify"]
