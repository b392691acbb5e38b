"""Results read from files: JSON -> the lab's typed results, checked field by field, or one line.

`RunResult.from_dict` builds the dataclasses from whatever the JSON holds; it does not check
that `peak.bytes` is a number or `timeline.live` a list of them, and a wrong type surfaced far
away (a `TypeError` in a table, an `OverflowError` in a plot, a crash in every served app that
plays back a pushed run). So every path that reads a result from a file a person gives
(`memlab view`, `diff`, `export`, `class push --results`) decodes through `result_from_dict`:
the dataclasses are checked against their own annotations (`int`, `float | None`,
`list[Block]`, `dict[str, int]`, nested results; a count is a whole number below 2**63, a
float is finite but in what a lesson reports, `metrics`, where a diverged loss is NaN), and
anything else is a `DecodeError` naming the field. Why generic: the annotations are the schema
already, and a field added to a result is checked without a second list to keep in step.

JSON text goes through `loads`: a file nested 200,000 deep (Python's parser gives up with a
`RecursionError`) or with an integer of 5,000 digits is one line too.

Headless: no Textual, no torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from functools import lru_cache
from typing import Any, Union

MAX_INT = 2**63  # a byte count or an index beyond this is a damaged file, not a measurement
# what a parser of foreign data may raise on a malformed input (never a reason to crash)
MALFORMED = (TypeError, ValueError, LookupError, AttributeError, ArithmeticError, RecursionError)


class DecodeError(ValueError):
    """One line: which field of the file holds what, and what was expected."""


# ---- JSON text ---------------------------------------------------------------------------------
def loads(text: str | bytes, what: str = "the file") -> Any:
    """json.loads, one line for every way it fails: not UTF-8, not JSON, nested too deep for
    Python's parser (its RecursionError), an integer too long for Python to read. (NaN and
    Infinity stay: a measured loss may be NaN; `check_types` keeps them out of counts.)"""
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
    except ValueError as e:  # an integer of more than 4,300 digits (Python's own limit)
        raise DecodeError(f"{what} is not JSON the lab reads ({str(e).splitlines()[0][:80]})"
                          ) from None


# ---- dataclasses against their annotations -------------------------------------------------------
@lru_cache(maxsize=None)
def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _expected(tp, finite: bool = True) -> str:
    """How an error message names what a field should hold."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_expected(t, finite) for t in typing.get_args(tp))
    if dataclasses.is_dataclass(tp):
        return f"an object ({tp.__name__})"
    names = {int: "a whole number", float: "a finite number" if finite else "a number",
             str: "text", bool: "true or false", type(None): "null", list: "a list",
             tuple: "a list", dict: "an object"}
    return names.get(origin or tp, getattr(tp, "__name__", str(tp)))


# fields whose numbers may be NaN or infinite: what a lesson reports (a loss that diverged)
NON_FINITE_OK = {"metrics"}


def check_types(obj: Any, tp: Any = None, where: str = "", finite: bool = True) -> None:
    """Raise DecodeError unless `obj` (a dataclass, by default) matches `tp`, recursively.
    Floats must be finite (a step time of Infinity is a damaged file), but in NON_FINITE_OK."""
    tp = type(obj) if tp is None else tp
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    name = where or "the result"
    if tp is Any:
        return
    if origin in (Union, types.UnionType):
        for option in args:
            try:
                check_types(obj, option, where, finite)
                return
            except DecodeError:
                continue
        raise DecodeError(f"{name} is {_what(obj)}; expected {_expected(tp, finite)}")
    if tp is type(None):
        if obj is not None:
            raise DecodeError(f"{name} is {_what(obj)}; expected nothing (null)")
        return
    if dataclasses.is_dataclass(tp):
        if not isinstance(obj, tp):
            raise DecodeError(f"{name} is {_what(obj)}; expected an object ({tp.__name__})")
        for f in dataclasses.fields(tp):
            check_types(getattr(obj, f.name), _hints(tp)[f.name],
                        f"{where}.{f.name}" if where else f.name,
                        finite and f.name not in NON_FINITE_OK)
        return
    if tp is bool:
        if not isinstance(obj, bool):
            raise DecodeError(f"{name} is {_what(obj)}; expected true or false")
        return
    if tp is int:
        if isinstance(obj, bool) or not isinstance(obj, int) or abs(obj) > MAX_INT:
            raise DecodeError(f"{name} is {_what(obj)}; expected a whole number")
        return
    if tp is float:
        if isinstance(obj, bool) or not isinstance(obj, (int, float)) \
                or (isinstance(obj, int) and abs(obj) > MAX_INT) \
                or (finite and isinstance(obj, float) and not math.isfinite(obj)):
            raise DecodeError(f"{name} is {_what(obj)}; expected a "
                              + ("finite number" if finite else "number"))
        return
    if tp is str:
        if not isinstance(obj, str):
            raise DecodeError(f"{name} is {_what(obj)}; expected text")
        return
    if origin is list:
        if not isinstance(obj, list):
            raise DecodeError(f"{name} is {_what(obj)}; expected a list")
        for i, x in enumerate(obj):
            check_types(x, args[0], f"{name}[{i}]", finite)
        return
    if origin is tuple:
        if not isinstance(obj, (tuple, list)) or (args and args[-1] is not Ellipsis
                                                  and len(obj) != len(args)):
            raise DecodeError(f"{name} is {_what(obj)}; expected a list of {len(args)}")
        for i, (x, t) in enumerate(zip(obj, args if args[-1] is not Ellipsis
                                       else [args[0]] * len(obj))):
            check_types(x, t, f"{name}[{i}]", finite)
        return
    if origin is dict:
        if not isinstance(obj, dict):
            raise DecodeError(f"{name} is {_what(obj)}; expected an object")
        for k, v in obj.items():
            check_types(k, args[0], f"{name} key", finite)
            check_types(v, args[1], f"{name}[{k!r}]", finite)
        return
    if isinstance(tp, type) and not isinstance(obj, tp):
        raise DecodeError(f"{name} is {_what(obj)}; expected {_expected(tp, finite)}")


def _what(obj: Any) -> str:
    if obj is None:
        return "null"
    if isinstance(obj, (bool, int, float)) and not (isinstance(obj, int) and abs(obj) > 10**20):
        return f"{type(obj).__name__} {obj!r}"
    if isinstance(obj, str):
        return f"text {obj[:20]!r}" + ("…" if len(obj) > 20 else "")
    return f"a {type(obj).__name__}"


# ---- results -----------------------------------------------------------------------------------
def result_from_dict(d: Any, what: str = "the result"):
    """A RunResult from a JSON object, every field checked. Raises DecodeError (one line,
    starting with `what`)."""
    from lab.measure.result import RunResult

    if not isinstance(d, dict):
        raise DecodeError(f"{what} is {_what(d)}, not a result object")
    try:
        result = RunResult.from_dict(d)
    except MALFORMED as e:
        raise DecodeError(f"{what} is not a memlab result ({_one_line(e)})") from None
    try:
        check_types(result)
    except RecursionError:
        raise DecodeError(f"{what} nests too deep to be a memlab result") from None
    except DecodeError as e:
        raise DecodeError(f"{what}: {e}") from None
    return result


def results_from_json(data: Any, what: str = "the result") -> list:
    """RunResults from what `memlab run --json` wrote: one object or a list of them."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise DecodeError(f"{what} list is empty")
    return [result_from_dict(d, what if len(items) == 1 else f"result {i + 1}")
            for i, d in enumerate(items)]


def _one_line(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text if len(text) <= 120 else text[:117] + "…"


__all__ = ["DecodeError", "MALFORMED", "check_types", "loads", "result_from_dict",
           "results_from_json"]
