"""Results read from a file a person gives: JSON text -> the lab's typed results, or one line.

`memlab view`, `diff`, `export` and `class push --results` read JSON that anyone may have
written. The typed decoding is the engine's (lab/measure/schema.py: every field against its
dataclass's type hints); this module is what stands between a file and it:

- `loads`: json.loads with one line for every way it fails: not UTF-8, not JSON, nested
  200,000 deep (Python's parser gives up with a `RecursionError`), an integer of more than
  4,300 digits (Python's own limit, a bare ValueError).
- a number check over the parsed JSON: a count the lab writes fits in 64 bits; a larger
  integer is well-typed but crashes whatever turns it into a float further on (a table, a
  plot, every served app that plays back a pushed run), so it stops here, in one line.
- `result_from_dict`, `results_from_json` (and `decoded` for another of the schema's types):
  the checks above, then the schema's decoding, every failure a `DecodeError` (one line,
  naming the field).

Headless: no Textual, no torch.
"""

from __future__ import annotations

import json
from typing import Any

MAX_INT = 2**64  # a byte count or an index beyond this is a damaged file, not a measurement
# what a parser of foreign data may raise on a malformed input (never a reason to crash)
MALFORMED = (TypeError, ValueError, LookupError, AttributeError, ArithmeticError, RecursionError)


class DecodeError(ValueError):
    """One line: which field of the file holds what, and what was expected."""


def loads(text: str | bytes, what: str = "the file") -> Any:
    """json.loads, one line for every way it fails (see the module docstring)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError(f"{what} is not UTF-8 text") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise DecodeError(f"{what} nests too deep to read") from None
    except json.JSONDecodeError as e:
        raise DecodeError(f"{what} is not JSON ({e.msg} at line {e.lineno})") from None
    except ValueError as e:  # an integer of more than 4,300 digits
        raise DecodeError(f"{what} is not JSON the lab reads ({str(e).splitlines()[0][:80]})"
                          ) from None


def check_numbers(data: Any, what: str = "the file") -> None:
    """DecodeError for an integer no count of the lab's could be (walks without recursion:
    the data may be nested as deep as Python's parser went)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            digits = int(abs(node).bit_length() * 0.30103) + 1
            raise DecodeError(f"{what} holds a number of {digits} digits; no count the lab "
                              "writes has more than 20")


def decoded(make, data: Any, what: str = ""):
    """`make(data)` (a schema decoder) after the number check; DecodeError for any failure,
    its line the schema's ("result.peak.bytes: expected an integer, got 'x'"), after `what`."""
    from lab.measure.schema import SchemaError

    try:
        check_numbers(data, what or "it")
        return make(data)
    except (SchemaError, DecodeError, *MALFORMED) as e:
        line = _one_line(e)
        raise DecodeError(f"{what}: {line}" if what else line) from None


def result_from_dict(d: Any, what: str = ""):
    """A RunResult from parsed JSON, every field checked. Raises DecodeError (one line)."""
    from lab.measure.result import RunResult

    return decoded(RunResult.from_dict, d, what)


def results_from_json(data: Any, what: str = "") -> list:
    """RunResults from what `memlab run --json` wrote: one object or a list of them."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise DecodeError("an empty list, not results")
    return [result_from_dict(d, what if len(items) == 1 else f"result {i + 1}")
            for i, d in enumerate(items)]


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 160 else text[:157] + "…"


__all__ = ["DecodeError", "MALFORMED", "check_numbers", "decoded", "loads", "result_from_dict",
           "results_from_json"]
