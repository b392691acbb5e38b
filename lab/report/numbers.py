"""Numbers a person gives the lab: ONE parser, so every one is refused the same way.

A prediction typed in the app, a size on the command line, a timeout in lesson.toml, a value
read back from a progress file: each goes through `parse_number`, which returns a finite
number inside the range the caller allows, or raises `NumberError` with one line that names
the thing, what was given and what is accepted. Why one function: Python's `float()` takes
"inf", "nan", "1e400" and four hundred nines (all infinite or not a number), and each caller
that used it alone let one through to a crash further on (an `OverflowError` when the value
became bytes, a plot that could not place it, "Infinity" written into a JSON file).

Headless and torch-free, like the rest of lab.report.
"""

from __future__ import annotations

import math
import re

MAX_TEXT = 64  # longer than any number a person means to type
_NUMBER_RE = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?$")


class NumberError(ValueError):
    """One line: what was given, and what would be accepted."""


def shown(value: object) -> str:
    """The value as an error message quotes it: short, whatever its size."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**24:
        return f"a number of about {int(abs(value).bit_length() * 0.30103) + 1} digits"
    if isinstance(value, str) and len(value) > 4 * MAX_TEXT:
        value = value[:MAX_TEXT]  # repr of the head only: the tail adds nothing but time
    text = repr(value)
    return text if len(text) <= 24 else text[:20] + "…" + text[-3:]


def _accepted(lo: float | None, hi: float | None, unit: str, integer: bool,
              above: bool = False) -> str:
    kind = "a whole number" if integer else "a number"
    u = f" {unit}" if unit else ""
    if above and lo is not None:
        return f"{kind} above {lo:g}" + (f" and up to {hi:g}" if hi is not None else "") + u
    if lo is not None and hi is not None:
        return f"{kind} from {lo:g} to {hi:g}{u}"
    if lo is not None:
        return f"{kind} of at least {lo:g}{u}"
    if hi is not None:
        return f"{kind} of at most {hi:g}{u}"
    return f"{kind}{u}"


def parse_number(value: object, *, what: str = "the number", lo: float | None = None,
                 hi: float | None = None, unit: str = "", integer: bool = False,
                 above: bool = False) -> float | int:
    """`value` (text a person typed, or a number read from a file) as a finite number in
    [lo, hi] (`above`: strictly more than `lo`). Raises `NumberError`.

    Text: optional sign, digits, one '.', an optional exponent ("1e3"); a ',' is taken as the
    decimal point ("4,4"). Not "inf", "nan", "0x10", "1_000" or anything longer than
    MAX_TEXT characters. Numbers: int or float, never bool. `integer`: a whole number (1.0
    counts) returned as int."""
    accepted = _accepted(lo, hi, unit, integer, above)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise NumberError(f"{what}: {shown(value)} is not a number; give {accepted}")
    if isinstance(value, str):
        text = value.strip().replace(",", ".")
        if len(text) > MAX_TEXT:
            raise NumberError(f"{what}: {shown(value)} is longer than {MAX_TEXT} characters; "
                              f"give {accepted}")
        if not _NUMBER_RE.match(text.lower()):
            raise NumberError(f"{what}: {shown(value)} is not a number; give {accepted}")
        number: float | int = float(text)
        if integer and re.fullmatch(r"[+-]?[0-9]+", text):
            number = int(text)
    else:
        number = value
    if isinstance(number, float) and not math.isfinite(number):
        raise NumberError(f"{what}: {shown(value)} is not a finite number; give {accepted}")
    if integer and isinstance(number, float):
        if not number.is_integer():
            raise NumberError(f"{what}: {shown(value)} is not a whole number; give {accepted}")
        number = int(number)
    if lo is not None and (number < lo or (above and number == lo)):
        raise NumberError(f"{what}: {shown(value)} is too small; give {accepted}")
    if hi is not None and number > hi:
        raise NumberError(f"{what}: {shown(value)} is too large; give {accepted}")
    return number


__all__ = ["MAX_TEXT", "NumberError", "parse_number", "shown"]
