"""Sizes in and out: "16GiB" -> bytes, bytes -> "2.00 GB". No torch import (the CLI starts fast).

The unit policy (one for app, CLI, exports and viewer): memory is shown in decimal units, GB =
10**9 bytes (the seed documents' unit), stepping down to MB / kB / B for small numbers, never in
scientific notation. GiB appears only where PyTorch's own text is quoted (its OOM message) and
where a capacity was given in GiB (a "16 GiB" virtual GPU is shown as "17.18 GB (16 GiB)").
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 10**3, "m": 10**6, "g": 10**9,
}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
SIZE_HELP = "a size such as 16GiB, 8GB, 512MiB or 1000000 (bytes)"


def parse_size(text: str) -> int:
    """'16GiB' -> 17179869184. Raises ValueError naming what is accepted."""
    m = _SIZE_RE.match(str(text))
    unit = m.group(2).lower() if m else None
    if not m or unit not in _UNITS:
        raise ValueError(f"{text!r} is not {SIZE_HELP}")
    value = float(m.group(1)) * _UNITS[unit]
    if value <= 0:
        raise ValueError(f"{text!r} must be more than 0 bytes")
    return int(value)


def format_bytes(n: int | float | None, unit: str = "auto") -> str:
    """Display only. GB = 10**9 (the seeds' unit); GiB = 2**30 (what nvidia-smi and PyTorch print)."""
    if n is None:
        return "—"
    if unit == "GB":
        return f"{n / 1e9:.2f} GB"
    if unit == "GiB":
        return f"{n / 2**30:.2f} GiB"
    a = abs(n)
    for div, name in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if a >= div:
            return f"{n / div:.2f} {name}"
    return f"{int(n)} B"
