"""Sizes in and out: "16GiB" -> bytes, bytes -> "2.00 GB". No torch import (the CLI starts fast).

The unit policy (one for app, CLI, exports and viewer): memory is shown in decimal units, GB =
10**9 bytes (the seed documents' unit), stepping down to MB / kB / B for small numbers (and up
to TB), never in scientific notation and never cut. GiB appears only where PyTorch's own text is
quoted (its OOM message, as it is) and in a GPU's capacity, which `capacity()` says once in both
units: a "16 GiB" virtual GPU is "17.18 GB (16 GiB)", an H200 "150.11 GB (139.80 GiB)" (the GiB
figure is the one PyTorch's OOM message gives as its "total capacity").

Differences carry their sign ("+1.20 GB", "−800.00 kB", "±0 B"; the minus is U+2212, as wide as
the plus in a terminal), percentages too ("−18%", "+2.7%", "+0.0026%"). Exact byte counts (what a
check compares) are written out with separators: "2,000,200,000 B".
"""

from __future__ import annotations

import math
import re

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 10**3, "m": 10**6, "g": 10**9,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
MAX_SIZE = 10**15  # 1 PB: far beyond any GPU; a bigger "size" is a typo
SIZE_HELP = "a size such as 16GiB, 8GB, 512MiB or 1000000 (bytes)"
MINUS = "\u2212"
DASH = "—"  # a value that does not exist (not measured, not applicable): never shown as 0
_STEPS = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB"))
_FIXED = {"TB": 10**12, "GB": 10**9, "MB": 10**6, "kB": 10**3, "GiB": 2**30, "MiB": 2**20}


def parse_size(text: str) -> int:
    """'16GiB' -> 17179869184. Raises ValueError naming what is accepted."""
    from .numbers import MAX_TEXT, NumberError, parse_number, shown

    m = _SIZE_RE.match(str(text)) if len(str(text)) <= MAX_TEXT else None
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"{shown(text)} is not {SIZE_HELP}")
    try:  # the one number parser: no "1e400", no four hundred nines
        value = parse_number(m.group(1), what="the size", lo=0, above=True,
                             hi=MAX_SIZE / _UNITS[unit]) * _UNITS[unit]
    except NumberError:
        raise ValueError(f"{shown(text)} must be more than 0 bytes and at most "
                         f"{format_bytes(MAX_SIZE, 'TB', 0)}") from None
    if value < 1:
        raise ValueError(f"{shown(text)} must be more than 0 bytes")
    return int(value)


def format_bytes(n: int | float | None, unit: str = "auto", digits: int = 2) -> str:
    """Bytes -> '12.24 GB', '44.02 MB', '65.50 kB', '4 B' (decimal units, `digits` decimals).

    `unit` fixes the unit ("GB", "MB", "kB", "TB"; "GiB"/"MiB" only to quote PyTorch or a GiB
    capacity). Negative numbers get a real minus. None -> '—'.
    """
    if n is None:
        return DASH
    sign = MINUS if n < 0 else ""
    a = abs(n)
    if unit != "auto":
        if unit not in _FIXED:
            raise ValueError(f"unknown unit {unit!r}; use auto, {', '.join(_FIXED)}")
        return f"{sign}{a / _FIXED[unit]:,.{digits}f} {unit}"
    for k, (div, name) in enumerate(_STEPS):
        if a >= div:
            value = round(a / div, digits)
            if value >= 1000 and k > 0:  # 999.999 MB rounds to 1000.00 MB: say 1.00 GB
                div, name = _STEPS[k - 1]
                value = a / div
            return f"{sign}{value:,.{digits}f} {name}"
    return f"{sign}{round(a):,} B"


def signed_bytes(n: int | float | None, digits: int = 2) -> str:
    """A difference: '+1.20 GB', '−800.00 kB', '±0 B'."""
    if n is None:
        return DASH
    if n == 0:
        return "±0 B"
    return ("+" if n > 0 else MINUS) + format_bytes(abs(n), digits=digits)


def exact_bytes(n: int | None) -> str:
    """'2,000,200,000 B': what checks compare, to the byte."""
    return DASH if n is None else f"{int(n):,} B".replace("-", MINUS)


def signed_exact_bytes(n: int | None) -> str:
    if n is None:
        return DASH
    return "±0 B" if n == 0 else ("+" if n > 0 else MINUS) + f"{abs(int(n)):,} B"


def percent(frac: float | None, signed: bool = True) -> str:
    """0.25 -> '+25%'; -0.18 -> '−18%'; 0.027 -> '+2.7%'; 2.56e-5 -> '+0.0026%'; 0 -> '±0%'.

    Whole percents from 9.5 % on, one decimal down to 0.1 %, then two significant digits (never
    '+0%' for a difference that is not zero, never scientific notation)."""
    if frac is None or (isinstance(frac, float) and math.isnan(frac)):
        return DASH
    p = abs(frac) * 100
    if p == 0:
        return "±0%" if signed else "0%"
    if p >= 9.5:
        text = f"{p:,.0f}"
    elif p >= 0.1:
        text = f"{p:.1f}"
    elif p >= 1e-6:
        text = f"{p:.{1 - math.floor(math.log10(p))}f}"
    else:
        text = "<0.000001"
    sign = ("+" if frac > 0 else MINUS) if signed else ""
    return f"{sign}{text}%"


def rough_percent(frac: float | None, signed: bool = True) -> str:
    """A guess's distance from the result, in whole percents (the course map's narrow column, the
    predictions screen and the Results tab say it alike): 0.25 -> '+25%', -0.18 -> '−18%',
    4.5e-5 -> '<1%' (a prediction that close is right: more digits say nothing), 0 -> '±0%',
    12.5 -> '+1,250%'."""
    if frac is None or (isinstance(frac, float) and math.isnan(frac)):
        return DASH
    whole = round(abs(frac) * 100)
    if whole == 0:
        return "<1%" if frac else ("±0%" if signed else "0%")
    return f"{('+' if frac > 0 else MINUS) if signed else ''}{whole:,}%"


def capacity(n: int | None) -> str:
    """A GPU's size, said once in both units: GB (the lab's) with GiB beside it, the unit PyTorch's
    own messages use ("139.80 GiB total capacity" in an OOM), so the two can be matched.

        16 GiB -> '17.18 GB (16 GiB)'; an H200's 150,109,880,320 B -> '150.11 GB (139.80 GiB)';
        30 MB -> '30.00 MB (28.61 MiB)'; 3,000 B -> '3.00 kB'
    """
    if n is None:
        return DASH
    for div, name in ((2**30, "GiB"), (2**20, "MiB")):
        if n >= div:
            whole = n % div == 0
            inner = f"{n // div:,}" if whole else f"{n / div:,.2f}"
            return f"{format_bytes(n)} ({inner} {name})"
    return format_bytes(n)


def as_given(n: int | None) -> str:
    """A size as a lesson or a person gave it: '16 GiB', '24 MiB' for whole GiB or MiB (the
    unit the `16GiB` they type is in), else like any size: '30.00 MB'."""
    if n is None:
        return DASH
    for div, name in ((2**30, "GiB"), (2**20, "MiB")):
        if n >= div and n % div == 0:
            return f"{n // div:,} {name}"
    return format_bytes(n)


def seconds(s: float | None) -> str:
    """'12 µs', '366.6 ms', '2.35 s', '1 min 05 s'."""
    if s is None:
        return DASH
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    if s < 60:
        return f"{s:.2f} s"
    m, rest = divmod(round(s), 60)
    return f"{m} min {rest:02d} s"


def elapsed(s: float | None) -> str:
    """Time on a clock that ticks once a second (a run in flight): '0 s', '42 s', '2 min 05 s'."""
    if s is None:
        return DASH
    m, rest = divmod(max(0, round(s)), 60)
    return f"{m} min {rest:02d} s" if m else f"{rest} s"


def ratio(x: float | None) -> str:
    """A measured / expected ratio: '×1.002', '×0.5'."""
    return DASH if x is None else "×" + number(x, digits=4)


def given_gb(v: float | None) -> str:
    """A number of GB a person gave (a prediction), as they meant it: 4.4 -> '4.4 GB'."""
    return DASH if v is None else f"{number(v, digits=6)} GB"


def number(v: float | int | None, digits: int = 4) -> str:
    """A plain number without scientific notation: 26950.3 -> '26,950'; 3.03812 -> '3.038'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return DASH
    if isinstance(v, bool):
        return str(v)
    a = abs(v)
    if a >= 10 ** (digits - 1) or float(v).is_integer():
        return f"{v:,.0f}".replace("-", MINUS)
    decimals = max(0, digits - 1 - math.floor(math.log10(a)))
    text = f"{v:,.{min(decimals, 12)}f}"
    return (text.rstrip("0").rstrip(".") if "." in text else text).replace("-", MINUS)


def is_bytes_metric(name: str) -> bool:
    """Experiment metrics that are byte counts ('parameter_bytes', 'reserved_free', ...)."""
    return "bytes" in name or name.split("_")[0] in ("allocated", "reserved", "nvml")


def metric(name: str, v: float | int | None, digits: int = 2) -> str:
    """An experiment's metric by its name: bytes as bytes, everything else as a plain number."""
    return format_bytes(v, digits=digits) if is_bytes_metric(name) else number(v)


def axis_unit(top: int | float) -> tuple[str, float]:
    """(name, divisor) for a plot axis whose largest value is `top` bytes: the unit
    `format_bytes(top)` writes it in (GB from 1 GB, MB from 1 MB, ...), so the axis and the
    numbers beside the plot ("peak 782.20 MB") read in one unit."""
    for div, name in _STEPS[1:]:
        if abs(top) >= div:
            return name, float(div)
    return "B", 1.0


__all__ = ["DASH", "MINUS", "SIZE_HELP", "as_given", "axis_unit", "capacity", "elapsed", "exact_bytes",
           "format_bytes", "given_gb", "is_bytes_metric", "metric", "number", "parse_size",
           "percent", "ratio", "rough_percent", "seconds", "signed_bytes", "signed_exact_bytes"]
